"""The issue's targets, each set against what the parts measured: PASS, FAIL, INFO or SKIP.

Pure functions of the parts' results (plain dicts, as they stand in report.json), so every
verdict is tested with made-up figures. Two kinds of target:
- performance (TFLOP/s against the spec peak, speed-ups, seconds): judged on a GPU only; with
  --cpu they are INFO, the figure shown but not judged, because the targets are a GPU's;
- correctness (verify finds no FAIL, sums are right, the cache hits, a resume matches): judged in
  both modes, since the CPU run exists to keep exactly these working.
A part that failed fails its targets; a part left out (--only) skips them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from torchrig.sizes import size_text

Part = dict[str, Any]  # {"status": "ok"|"failed"|"skipped", "reason": str, "figures": {...}}

QUICK_VERIFY_MAX_S = 5.0
FULL_VERIFY_MAX_S = 60.0
MATMUL_MIN_FRACTION = 0.70
MEMORY_MIN_FRACTION = 0.85
DEFAULTS_MIN_SPEEDUP = 2.5
DDP_MAX_OVERHEAD_PERCENT = 5.0
SAVE_MIN_FRACTION_OF_RAW = 0.8
REPORT_MAX_S = 600.0
# With deterministic algorithms off (the example's choice on GPUs), bf16 autocast and kernels that
# add in a varying order make two runs differ in the last bits, which grow over the steps; a
# loss curve within 2 % at every step is "the same curve". With them on, it must be exact.
LOSS_RTOL_NONDETERMINISTIC = 0.02


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    INFO = "INFO"  # a figure to read, not judged here
    SKIP = "SKIP"  # not measured (the note says why)


@dataclass
class Target:
    part: str
    name: str
    measured: str
    goal: str
    verdict: Verdict
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["verdict"] = self.verdict.value
        return result


@dataclass(frozen=True)
class Context:
    mode: str  # "gpu" or "cpu"
    gpu_name: str | None = None
    peak: dict[str, Any] | None = None  # torchrig.verify.peaks.Peak as a dict, if the GPU has one
    elapsed_s: float | None = None

    @property
    def on_gpu(self) -> bool:
        return self.mode == "gpu"


def row(
    part: str, spec: tuple[str, str], measured: str, verdict: Verdict, note: str = ""
) -> Target:
    """A target from its (name, goal) pair and what was measured."""
    name, goal = spec
    return Target(part, name, measured, goal, verdict, note)


def performance(ctx: Context, ok: bool) -> tuple[Verdict, str]:
    if not ctx.on_gpu:
        return Verdict.INFO, "a GPU target: with --cpu the figure only shows the pipeline runs"
    return (Verdict.PASS if ok else Verdict.FAIL), ""


def correctness(ok: bool, note: str = "") -> tuple[Verdict, str]:
    return (Verdict.PASS if ok else Verdict.FAIL), note


# --- helpers for parts that did not run -------------------------------------------------------


def unavailable(part_name: str, part: Part | None, names: list[tuple[str, str]]) -> list[Target]:
    """The targets of a part that failed (FAIL) or did not run (SKIP)."""
    if part is not None and part.get("status") == "failed":
        verdict, note = Verdict.FAIL, f"the part failed: {part.get('reason')}"
    elif part is None:
        verdict, note = Verdict.SKIP, "the part was not run (--only)"
    else:
        verdict, note = Verdict.SKIP, str(part.get("reason") or "skipped")
    return [Target(part_name, name, "-", goal, verdict, note) for name, goal in names]


Judge = Callable[[Context, Part | None], list[Target]]


def judging(part_name: str, specs: list[tuple[str, str]]) -> Callable[..., Judge]:
    """A part's judge: its targets from its figures when it ran, `unavailable` when not."""

    def wrap(judge: Callable[[Context, dict[str, Any]], list[Target]]) -> Judge:
        def judged(ctx: Context, part: Part | None) -> list[Target]:
            if part is None or part.get("status") != "ok":
                return unavailable(part_name, part, specs)
            return judge(ctx, part["figures"])

        return judged

    return wrap


# --- verify -------------------------------------------------------------------------------

VERIFY_TARGETS = [
    ("`torchrig verify --quick` wall time", f"<= {QUICK_VERIFY_MAX_S:g} s"),
    ("`torchrig verify` (full) wall time", f"<= {FULL_VERIFY_MAX_S:g} s"),
    ("`torchrig verify` verdicts", "no FAIL (exit 0)"),
    ("bf16 dense matmul", f">= {MATMUL_MIN_FRACTION:.0%} of the spec peak"),
    ("device memory bandwidth", f">= {MEMORY_MIN_FRACTION:.0%} of the spec"),
    ("spec peak the table picked", "names the board right (SXM, PCIe, NVL)"),
    ("all-reduce sums", "exact at every size"),
    ("all-reduce bandwidth", "reported"),
]


@judging("verify", VERIFY_TARGETS)
def verify_targets(ctx: Context, f: dict[str, Any]) -> list[Target]:
    quick, full = f["quick"], f["full"]
    targets = [
        row(
            "verify",
            VERIFY_TARGETS[0],
            f"{quick['seconds']:.1f} s",
            *performance(ctx, quick["seconds"] <= QUICK_VERIFY_MAX_S),
        ),
        row(
            "verify",
            VERIFY_TARGETS[1],
            f"{full['seconds']:.1f} s",
            *performance(ctx, full["seconds"] <= FULL_VERIFY_MAX_S),
        ),
        verdict_target(quick, full),
    ]
    targets += fraction_targets(ctx, f.get("matmul", {}), "bf16", VERIFY_TARGETS[3])
    targets += fraction_targets(ctx, f.get("memory", {}), None, VERIFY_TARGETS[4])
    targets.append(peak_target(ctx))
    targets += allreduce_targets(f.get("allreduce"))
    return targets


def verdict_target(quick: dict[str, Any], full: dict[str, Any]) -> Target:
    def counts(run: dict[str, Any]) -> str:
        summary = run.get("summary") or {}
        shown = ", ".join(f"{n} {k.upper()}" for k, n in summary.items() if n)
        return f"exit {run['exit_code']} ({shown or 'no checks'})"

    failing = [*quick.get("failed_checks", []), *full.get("failed_checks", [])]
    ok = quick["exit_code"] == 0 and full["exit_code"] == 0
    note = "FAIL: " + "; ".join(dict.fromkeys(failing)) if failing else ""
    return row(
        "verify",
        VERIFY_TARGETS[2],
        f"quick {counts(quick)}; full {counts(full)}",
        *correctness(ok, note),
    )


def fraction_targets(
    ctx: Context, per_gpu: dict[str, Any], dtype: str | None, target: tuple[str, str]
) -> list[Target]:
    """One row per GPU: a measured figure as a fraction of its spec (matmul or memory)."""
    name, goal = target
    minimum = MATMUL_MIN_FRACTION if dtype else MEMORY_MIN_FRACTION
    if not ctx.on_gpu:
        return [Target("verify", name, "-", goal, Verdict.SKIP, "no spec peak for a CPU")]
    if not per_gpu:
        return [Target("verify", name, "-", goal, Verdict.FAIL, "verify measured nothing")]
    rows = []
    for label, data in per_gpu.items():
        if dtype:
            value, unit = data.get("tflops", {}).get(dtype), "TFLOP/s"
            fraction = data.get("fraction_of_peak", {}).get(dtype)
            spec = (ctx.peak or {}).get(f"{dtype}_tflops")
        else:
            value, unit = data.get("gbps"), "GB/s"
            fraction, spec = data.get("fraction_of_peak"), data.get("peak_gbps")
        if value is None:
            rows.append(Target("verify", f"{label} {name}", "-", goal, Verdict.FAIL, "no figure"))
            continue
        if fraction is None or not spec:
            rows.append(
                Target(
                    "verify",
                    f"{label} {name}",
                    f"{value:.0f} {unit}",
                    goal,
                    Verdict.SKIP,
                    f"{ctx.gpu_name} is not in the peak table (torchrig/verify/peaks.py)",
                )
            )
            continue
        measured = f"{value:.0f} {unit} = {fraction:.0%} of {spec:g}"
        rows.append(
            Target(
                "verify", f"{label} {name}", measured, goal, *performance(ctx, fraction >= minimum)
            )
        )
    return rows


def peak_target(ctx: Context) -> Target:
    name, goal = VERIFY_TARGETS[5]
    if not ctx.on_gpu:
        return Target("verify", name, "-", goal, Verdict.SKIP, "no GPU")
    if ctx.peak is None:
        note = "absolute figures only; add the board to torchrig/verify/peaks.py"
        return Target("verify", name, f"{ctx.gpu_name}: no entry", goal, Verdict.INFO, note)
    peak = ctx.peak
    measured = (
        f"{ctx.gpu_name} -> {peak['model']} ({peak['bf16_tflops']:g} TFLOP/s bf16 dense, "
        f"{peak['memory_gbps']:g} GB/s)"
    )
    return Target("verify", name, measured, goal, Verdict.INFO, "check against the data sheet")


def allreduce_targets(allreduce: dict[str, Any] | None) -> list[Target]:
    (sums, sums_goal), (bandwidth, bandwidth_goal) = VERIFY_TARGETS[6], VERIFY_TARGETS[7]
    if not allreduce or not allreduce.get("sweep"):
        return [
            Target("verify", sums, "-", sums_goal, Verdict.FAIL, "no all-reduce result"),
            Target("verify", bandwidth, "-", bandwidth_goal, Verdict.SKIP, "no result"),
        ]
    sweep = allreduce["sweep"]
    wrong = [entry["bytes"] for entry in sweep if not entry.get("correct")]
    where = f"{allreduce['backend']}, {allreduce['world']} rank(s)"
    best = max(sweep, key=lambda entry: entry.get("algbw_gbps", 0.0))
    largest = max(sweep, key=lambda entry: entry["bytes"])
    return [
        Target(
            "verify",
            sums,
            f"{len(sweep) - len(wrong)}/{len(sweep)} sizes right ({where})",
            sums_goal,
            *correctness(not wrong, f"wrong at {wrong} bytes" if wrong else ""),
        ),
        Target(
            "verify",
            bandwidth,
            f"algbw {best['algbw_gbps']:.1f} GB/s at {mib(best['bytes'])} (busbw "
            f"{best['busbw_gbps']:.1f})"
            + (
                f"; at {mib(largest['bytes'])}: algbw {largest['algbw_gbps']:.1f} GB/s"
                if largest is not best
                else ""
            ),
            bandwidth_goal,
            Verdict.INFO,
            "one GPU: NCCL copies within the GPU, a check of the path, not of a fabric"
            if allreduce["world"] == 1
            else "",
        ),
    ]


def mib(nbytes: int) -> str:
    return size_text(nbytes, digits=None)


# --- nvidia-smi against NVML ----------------------------------------------------------------

SMI_TARGETS = [("verify's NVML verdicts vs nvidia-smi", "the same facts and verdicts")]


@judging("smi", SMI_TARGETS)
def smi_targets(_ctx: Context, f: dict[str, Any]) -> list[Target]:
    rows = f["comparisons"]
    unpaired = f.get("unpaired", [])
    different = [f"{row['gpu']} {row['check']}" for row in rows if not row["match"]]
    measured = f"{len(rows) - len(different)}/{len(rows)} checks agree"
    problems = different + unpaired
    note = "differ: " + "; ".join(problems) if problems else ""
    verdict = correctness(bool(rows) and not problems, note)
    return [row("smi", SMI_TARGETS[0], measured, *verdict)]


# --- the gpu marker tests ------------------------------------------------------------------

TESTS_TARGETS = [("`pytest -m gpu tests/gpu`", "all pass")]


@judging("tests", TESTS_TARGETS)
def tests_targets(ctx: Context, f: dict[str, Any]) -> list[Target]:
    measured = (
        f"{f['passed']} passed, {f['failed']} failed, {f['errors']} errors, {f['skipped']} skipped"
    )
    name, goal = TESTS_TARGETS[0]
    if f["failed"] or f["errors"]:
        return [
            Target(
                "tests",
                name,
                measured,
                goal,
                Verdict.FAIL,
                "failed: " + ", ".join(f.get("failures", [])),
            )
        ]
    if f["passed"] == 0:
        reasons = "; ".join(f.get("skip_reasons", [])) or "nothing ran"
        verdict = Verdict.FAIL if ctx.on_gpu else Verdict.SKIP
        return [Target("tests", name, measured, goal, verdict, f"skipped: {reasons}")]
    note = "skipped: " + "; ".join(f.get("skip_reasons", [])) if f["skipped"] else ""
    return [Target("tests", name, measured, goal, Verdict.PASS, note)]


# --- training throughput ------------------------------------------------------------------

TRAINING_TARGETS = [
    ("example defaults vs naive fp32 eager", f">= {DEFAULTS_MIN_SPEEDUP:g}x images/s"),
    ("DDP, one process, vs the plain model", f"<= {DDP_MAX_OVERHEAD_PERCENT:g} % slower"),
]


@judging("training", TRAINING_TARGETS)
def training_targets(ctx: Context, f: dict[str, Any]) -> list[Target]:
    speedup, overhead = f["speedup_defaults_vs_naive"], f["ddp_overhead_percent"]
    return [
        row(
            "training",
            TRAINING_TARGETS[0],
            f"{speedup:.2f}x ({f['images_per_s_defaults']:.0f} vs "
            f"{f['images_per_s_naive_fp32_eager']:.0f} images/s)",
            *performance(ctx, speedup >= DEFAULTS_MIN_SPEEDUP),
        ),
        row(
            "training",
            TRAINING_TARGETS[1],
            f"{overhead:+.1f} % ({f['images_per_s_ddp_1proc']:.0f} vs "
            f"{f['images_per_s_plain']:.0f} images/s)",
            *performance(ctx, overhead <= DDP_MAX_OVERHEAD_PERCENT),
        ),
    ]


# --- torch.compile ------------------------------------------------------------------------

COMPILE_TARGETS = [
    ("torch.compile first step, cold cache", "reported"),
    ("torch.compile first step, second run", "reported"),
    ("compile cache on the second run", "hits, no misses"),
]


@judging("compile", COMPILE_TARGETS)
def compile_targets(_ctx: Context, f: dict[str, Any]) -> list[Target]:
    cold, warm = f["cold"], f["warm"]
    cache = warm["cache"]
    hits, misses = cache.get("fxgraph_cache_hit", 0), cache.get("fxgraph_cache_miss", 0)
    counts = (
        f"FX graph cache {hits} hit(s), {misses} miss(es); AOTAutograd cache "
        f"{cache.get('autograd_cache_hit', 0)} hit(s), {cache.get('autograd_cache_miss', 0)} "
        "miss(es)"
    )
    return [
        row(
            "compile",
            COMPILE_TARGETS[0],
            f"{cold['first_step_s']:.1f} s (a later step: {cold['later_step_s'] * 1000:.1f} ms)",
            Verdict.INFO,
        ),
        row("compile", COMPILE_TARGETS[1], f"{warm['first_step_s']:.1f} s", Verdict.INFO),
        row("compile", COMPILE_TARGETS[2], counts, *correctness(hits > 0 and misses == 0)),
    ]


# --- resume after a kill ------------------------------------------------------------------

RESUME_TARGETS = [
    ("FSDP2 sharded checkpoints on disk", "a folder of shards per step"),
    ("loss curve after kill and resume", "the same as an uninterrupted run"),
    ("weights after kill and resume", "bitwise equal where deterministic"),
]


@judging("resume", RESUME_TARGETS)
def resume_targets(_ctx: Context, f: dict[str, Any]) -> list[Target]:
    deterministic = bool(f["deterministic"])
    tolerance = 0.0 if deterministic else LOSS_RTOL_NONDETERMINISTIC
    mode = "deterministic algorithms on" if deterministic else "deterministic algorithms off"
    closeness = "exact" if deterministic else f"within {tolerance:.0%} at every step"
    loss_ok = f["loss_steps_compared"] == f["steps"] and f["max_loss_rel_diff"] <= tolerance
    weights_equal = bool(f["weights_bitwise_equal"])
    if deterministic:
        weights = correctness(weights_equal)
    elif weights_equal:
        weights = (Verdict.PASS, "equal even without deterministic algorithms")
    else:
        weights = (Verdict.INFO, "bitwise equality needs deterministic algorithms")
    return [
        row(
            "resume",
            RESUME_TARGETS[0],
            f"{f['shard_files']} shard file(s) in {f['checkpoint_steps']} step folder(s)",
            *correctness(f["shard_files"] > 0),
        ),
        row(
            "resume",
            (RESUME_TARGETS[1][0], f"{RESUME_TARGETS[1][1]} ({closeness}, {mode})"),
            f"killed after step {f['killed_after_step']}, resumed from {f['resumed_from']}; "
            f"{f['loss_steps_compared']}/{f['steps']} steps, max difference "
            f"{f['max_loss_abs_diff']:.2g} ({f['max_loss_rel_diff']:.2%})",
            *correctness(loss_ok),
        ),
        row(
            "resume",
            RESUME_TARGETS[2],
            (
                "bitwise equal"
                if weights_equal
                else f"differ, max |difference| {f['max_weight_abs_diff']:.3g}"
            )
            + f" ({mode})",
            *weights,
        ),
    ]


# --- checkpoint save/load -----------------------------------------------------------------

CHECKPOINT_TARGETS = [
    ("checkpoint save vs raw disk write", f">= {SAVE_MIN_FRACTION_OF_RAW:g} of raw throughput"),
    ("checkpoint load vs raw disk read", "reported"),
]


@judging("checkpoint", CHECKPOINT_TARGETS)
def checkpoint_targets(ctx: Context, f: dict[str, Any]) -> list[Target]:
    size = f"{f['tensor_bytes'] / 1e9:.2f} GB on {f['device']}"
    medians = f["median_s"]
    return [
        row(
            "checkpoint",
            CHECKPOINT_TARGETS[0],
            f"{f['save_vs_raw']:.2f} ({size}: save {medians['CheckpointManager.save']:.2f} s, "
            f"raw {medians['raw write + fsync']:.2f} s)",
            *performance(ctx, f["save_vs_raw"] >= SAVE_MIN_FRACTION_OF_RAW),
        ),
        row(
            "checkpoint",
            CHECKPOINT_TARGETS[1],
            f"{f['load_vs_raw']:.2f} (load {medians['CheckpointManager.load_latest']:.2f} s, "
            f"raw read {medians['raw read into new memory']:.2f} s; cold reads: "
            f"{f['cold_reads']})",
            Verdict.INFO,
        ),
    ]


# --- everything ---------------------------------------------------------------------------

PART_TARGETS: dict[str, Callable[[Context, Part | None], list[Target]]] = {
    "smi": smi_targets,
    "verify": verify_targets,
    "tests": tests_targets,
    "compile": compile_targets,
    "training": training_targets,
    "resume": resume_targets,
    "checkpoint": checkpoint_targets,
}


def evaluate(ctx: Context, parts: dict[str, Part]) -> list[Target]:
    targets = [row for name, judge in PART_TARGETS.items() for row in judge(ctx, parts.get(name))]
    if ctx.elapsed_s is not None:
        targets.append(
            Target(
                "report",
                "the whole report's wall time",
                f"{ctx.elapsed_s:.0f} s",
                f"<= {REPORT_MAX_S:g} s on one H100",
                *(
                    performance(ctx, ctx.elapsed_s <= REPORT_MAX_S)
                    if len(parts) == len(PART_TARGETS)
                    else (Verdict.INFO, "not every part ran (--only)")
                ),
            )
        )
    return targets


def summary(targets: list[Target]) -> dict[str, int]:
    counts = {verdict.value: 0 for verdict in Verdict}
    for target in targets:
        counts[target.verdict.value] += 1
    return counts
