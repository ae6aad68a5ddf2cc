"""report.md from report.json's dict: the machine, every target beside its figure, each part's
details. A pure function of the dict, so a saved report.json renders again the same."""

from __future__ import annotations

from typing import Any

Row = list[str]


def table(header: Row, rows: list[Row]) -> list[str]:
    def line(cells: Row) -> str:
        escaped = (cell.replace("|", "\\|").replace("\n", " ") for cell in cells)
        return "| " + " | ".join(escaped) + " |"

    return [line(header), line(["---"] * len(header)), *(line(row) for row in rows)]


def section(title: str, intro: str, header: Row, rows: list[Row]) -> list[str]:
    return [f"## {title}", "", intro, "", *table(header, rows)]


def render(report: dict[str, Any]) -> str:
    summary = report["summary"]
    counts = ", ".join(f"{n} {verdict}" for verdict, n in summary.items() if n)
    failed_parts = [name for name, part in report["parts"].items() if part["status"] == "failed"]
    lines = [
        "# torchrig GPU report",
        "",
        f"{report['mode'].upper()} mode, {report['started']}, {report['elapsed_s']:.0f} s. "
        f"Targets: {counts}. Exit code {report['exit_code']}"
        + (f" (parts failed: {', '.join(failed_parts)})." if failed_parts else "."),
        *(
            ["", "**Incomplete**: the report stopped before its end; what is here was measured."]
            if not report.get("complete", True)
            else []
        ),
        "",
        f"Command: `{report['command']}`",
        "",
        *machine_section(report["environment"]),
        "",
        "## Targets",
        "",
        *table(
            ["part", "figure", "measured", "target", "verdict", "note"],
            [
                [t["part"], t["name"], t["measured"], t["goal"], f"**{t['verdict']}**", t["note"]]
                for t in report["targets"]
            ],
        ),
        "",
        "## Parts",
        "",
        *table(
            ["part", "status", "seconds", "note", "log"],
            [
                [
                    name,
                    part["status"],
                    f"{part['seconds']:.1f}",
                    part.get("reason") or "",
                    ", ".join(part.get("logs", [])),
                ]
                for name, part in report["parts"].items()
            ],
        ),
    ]
    for name, part in report["parts"].items():
        details = DETAILS.get(name)
        if details and part["status"] == "ok":
            lines += ["", *details(part["figures"])]
    return "\n".join(lines) + "\n"


def machine_section(env: dict[str, Any]) -> list[str]:
    torch = env.get("torch") or {}
    gpus = env.get("gpus") or []
    peak = env.get("peak")
    gpu_text = "; ".join(
        f"{gpu['name']} ({gpu['memory_gib']} GiB, {gpu['pci_bus_id']})" for gpu in gpus
    )
    peak_text = (
        f"{peak['model']}: {peak['bf16_tflops']} TFLOP/s bf16 dense, {peak['memory_gbps']:g} GB/s"
        if peak
        else "no entry"
    )
    packages = ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items() if v)
    rows = [
        ["GPUs", gpu_text or f"none ({env.get('nvml_error') or 'NVML lists none'})"],
        ["peak table entry", peak_text if gpus else "-"],
        ["driver", f"{env['driver']} (supports CUDA {env.get('driver_cuda')})"
                   if env.get("driver") else "-"],
        ["torch", f"{torch.get('version')}: CUDA {torch.get('cuda')}, cuDNN "
                  f"{torch.get('cudnn')}, NCCL {torch.get('nccl')}"],
        ["packages", packages],
        ["host", f"{env.get('host')}, {env.get('cpus')} CPUs, {env.get('platform')}, "
                 f"Python {env.get('python')}"],
        ["CUDA_VISIBLE_DEVICES", str(env.get("CUDA_VISIBLE_DEVICES"))],
    ]  # fmt: skip
    return ["## Machine", "", *table(["", ""], rows)]


def smi_details(f: dict[str, Any]) -> list[str]:
    rows = [
        [row["gpu"], row["check"], row["nvml"], row["nvidia_smi"],
         "/".join(row["nvml_verdicts"]), "/".join(row["nvidia_smi_verdicts"]),
         "yes" if row["match"] else "**no**"]
        for row in f["comparisons"]
    ]  # fmt: skip
    return [
        "## nvidia-smi against NVML",
        "",
        f"Driver: NVML {f['nvml_driver']}, nvidia-smi {f['nvidia_smi_driver']} (CUDA "
        f"{f['nvidia_smi_cuda']}); agreed on attempt {f['attempts']}.",
        "",
        *table(
            ["GPU", "check", "NVML", "nvidia-smi", "verdict (NVML)", "verdict (smi)", "same"], rows
        ),
        *([""] + [f"- unpaired: {entry}" for entry in f["unpaired"]] if f["unpaired"] else []),
    ]


def verify_details(f: dict[str, Any]) -> list[str]:
    lines = ["## torchrig verify", ""]
    for flavour in ("quick", "full"):
        run = f[flavour]
        counts = ", ".join(f"{n} {verdict}" for verdict, n in (run["summary"] or {}).items())
        lines.append(
            f"- {flavour}: {run['seconds']:.1f} s from start to exit ({run['elapsed_s']} s of "
            f"checks), exit {run['exit_code']}: {counts}"
        )
        lines += [f"  - FAIL {item}" for item in run["failed_checks"]]
        lines += [f"  - WARN {item}" for item in run["warned_checks"]]
    if f.get("compile"):
        lines.append(f"- torch.compile check: {f['compile']['verdict']}, {f['compile']['summary']}")
    allreduce = f.get("allreduce")
    if allreduce and allreduce.get("sweep"):
        lines += [
            "",
            f"All-reduce ({allreduce['backend']}, {allreduce['world']} rank(s)):",
            "",
            *table(
                ["bytes", "time us", "algbw GB/s", "busbw GB/s", "correct"],
                [
                    [
                        str(e["bytes"]),
                        f"{e['time_us']:.1f}",
                        f"{e['algbw_gbps']:.2f}",
                        f"{e['busbw_gbps']:.2f}",
                        str(e["correct"]),
                    ]
                    for e in allreduce["sweep"]
                ],
            ),
        ]
    return lines


def compile_details(f: dict[str, Any]) -> list[str]:
    rows = [
        [run, f"{f[run]['first_step_s']:.2f}", f"{f[run]['later_step_s'] * 1000:.1f}",
         ", ".join(f"{k} {v}" for k, v in f[run]["cache"].items())]
        for run in ("cold", "warm")
    ]  # fmt: skip
    intro = f"{f['cold']['benchmark']}; cache folder `{f['cache_dir']}` (fresh for the cold run)."
    return section("torch.compile", intro, ["run", "first step s", "later step ms", "cache"], rows)


def training_details(f: dict[str, Any]) -> list[str]:
    keys = [key for key in f if key.startswith(("images_per_s", "speedup", "ddp_"))]
    intro = (
        f"{f['benchmark']} ({f['device']}), {f['steps']} timed steps after {f['warmup']} warm-up."
    )
    return section(
        "Training throughput", intro, ["figure", "value"], [[k, str(f[k])] for k in keys]
    )


def resume_details(f: dict[str, Any]) -> list[str]:
    curve = f.get("loss_curve", [])
    rows = [[str(step), f"{a:.4f}", f"{b:.4f}", f"{b - a:+.4f}"] for step, a, b in curve]
    intro = (
        f"`torchrun --nproc-per-node {f['nproc']} workspace/examples/train_ddp.py "
        f"{' '.join(f['example_args'])}`; deterministic algorithms "
        f"{'on' if f['deterministic'] else 'off'}. Killed after step {f['killed_after_step']}, "
        f"resumed from step {f['resumed_from']}; {f['tensors_different']} of {f['tensors']} "
        "weight tensors differ."
    )
    header = ["step", "uninterrupted", "killed + resumed", "difference"]
    return section("Kill and resume (FSDP2)", intro, header, rows)


def checkpoint_details(f: dict[str, Any]) -> list[str]:
    nbytes = f["tensor_bytes"]
    rows = [
        [name, f"{seconds:.3f}", f"{f['min_s'][name]:.3f}", f"{nbytes / 1e6 / seconds:.0f}"]
        for name, seconds in f["median_s"].items()
    ]
    intro = (
        f"{nbytes / 1e9:.2f} GB of tensors on {f['device']}, written to {f['disk']}, "
        f"{f['repeats']} repeats, cold reads: {f['cold_reads']}."
    )
    header = ["operation", "median s", "min s", "MB/s (median)"]
    return section("Checkpoint save/load", intro, header, rows)


def tests_details(f: dict[str, Any]) -> list[str]:
    lines = [
        "## gpu marker tests",
        "",
        f"{f['tests']} tests: {f['passed']} passed, {f['failed']} failed, {f['errors']} errors, "
        f"{f['skipped']} skipped.",
    ]
    lines += [f"- failed: {name}" for name in f["failures"]]
    lines += [f"- skipped: {reason}" for reason in f["skip_reasons"]]
    return lines


DETAILS = {
    "smi": smi_details,
    "verify": verify_details,
    "compile": compile_details,
    "training": training_details,
    "resume": resume_details,
    "checkpoint": checkpoint_details,
    "tests": tests_details,
}
