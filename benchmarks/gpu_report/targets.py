"""The targets: each part's figures set beside their goals, one row per target with PASS, FAIL,
INFO or SKIP. Correctness is judged in both modes, performance on a GPU only."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Published runs on the same cards (mamf-finder's bf16 matmul; a STREAM triad), the figures a
# healthy card reaches in practice: shown beside verify's, not judged (the plain loop is).
PUBLISHED_BF16_TFLOPS = {"H100": 794.5, "H200": 794.5}
PUBLISHED_TRIAD_GBPS = {"H100": 2970.0, "H200": 4150.0}
# verify's method against a plain torch loop in the same process (verify_figures.py).
OF_PLAIN_LOOP = 0.98
# Hopper's tensor cores run fp16 and bf16 at one rate: more apart is the method, not the card.
SAME_FP16_BF16_RATE = ("H100", "H200")
FP16_BF16_APART = 0.03
VERIFY_QUICK_MAX_S, VERIFY_FULL_MAX_S = 3.0, 60.0
DEFAULTS_MIN_SPEEDUP = 2.5
DDP_MAX_OVERHEAD_PERCENT = 3.0
SAVE_MIN_FRACTION_OF_RAW = 0.9
# Without deterministic algorithms (the example's choice on GPUs) a resumed curve may drift a
# little: atomics in the backward pass sum in another order.
LOSS_RTOL_NONDETERMINISTIC = 0.02
VERDICTS = ("PASS", "FAIL", "INFO", "SKIP")
# Parts whose figures are shown, never judged: one that does not finish is INFO, not FAIL (the
# compile modes run last, with the time left).
SHOWN_ONLY = ("modes",)
# The compile modes that record CUDA graphs (torch._inductor.list_mode_options()).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")
NVML_TEST = "test_nvml_verdicts_match_nvidia_smi"


@dataclass(frozen=True)
class Judge:
    """How a row is judged: correctness always; performance only on a GPU."""

    cpu: bool

    def correct(self, ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    def fast(self, ok: bool) -> str:
        return "INFO" if self.cpu else ("PASS" if ok else "FAIL")


def targets(parts: dict[str, dict[str, Any]], gpu_name: str | None, cpu: bool) -> list[dict]:
    """One row per target: (part, name, measured, goal, verdict); a part that did not finish
    gives one row saying so."""
    judge, rows = Judge(cpu), []
    for name, rows_of in TARGETS.items():
        part = parts.get(name)
        if part is None:
            continue
        if part["status"] != "ok":
            verdict = "INFO" if name in SHOWN_ONLY else "FAIL"
            rows.append(row(name, "the part", "-", "runs", verdict, part["reason"]))
            continue
        rows.extend(rows_of(part["figures"], judge, gpu_name))
    return rows


def row(part: str, name: str, measured: str, goal: str, verdict: str, note: str = "",
        published: str = "-") -> dict:  # fmt: skip
    """One target; `published`: what published runs on the same card reach, where known."""
    return {"part": part, "name": name, "measured": measured, "goal": goal,
            "published": published, "verdict": verdict, "note": note}  # fmt: skip


def published(table: dict[str, float], gpu_name: str | None) -> float | None:
    return next((value for key, value in table.items() if key in (gpu_name or "")), None)


def verify_rows(f: dict[str, Any], judge: Judge, gpu_name: str | None) -> list[dict]:
    quick, full = f["quick"], f["full"]
    rows = [
        row("verify", "`torchrig verify` verdicts", f"quick {quick['summary']}, full "
            f"{full['summary']}", "no FAIL", judge.correct(not quick["failed"] + full["failed"]),
            "; ".join(quick["failed"] + full["failed"])),
        row("verify", "`torchrig verify --quick` wall time", f"{quick['seconds']:.1f} s",
            f"<= {VERIFY_QUICK_MAX_S:g} s", judge.fast(quick["seconds"] <= VERIFY_QUICK_MAX_S)),
        row("verify", "`torchrig verify` wall time", f"{full['seconds']:.1f} s",
            f"<= {VERIFY_FULL_MAX_S:g} s", judge.fast(full["seconds"] <= VERIFY_FULL_MAX_S)),
    ]  # fmt: skip
    rows += figure_rows(f["figures"], judge, gpu_name)
    allreduce = f["allreduce"]
    if allreduce is None:
        return [*rows, row("verify", "all-reduce sums", "-", "correct", "FAIL", "no result")]
    best = allreduce["best_algbw_gbps"]
    return [
        *rows,
        row("verify", "all-reduce sums", f"{allreduce['world']} rank(s), {allreduce['verdict']}",
            "correct", judge.correct(allreduce["correct"])),
        row("verify", "all-reduce algbw", "-" if best is None else f"{best:.1f} GB/s",
            "reported", "INFO"),
    ]  # fmt: skip


def figure_rows(f: dict[str, Any], judge: Judge, gpu_name: str | None) -> list[dict]:
    """verify's bf16 matmul and triad against a plain loop in the same process (the published
    runs beside them), and fp16 against bf16 where the tensor cores run both at one rate."""
    label, verify, plain = f["label"], f["verify"], f["plain"]
    rows = []
    for key, figure, unit, table in (
        ("bf16", "bf16 matmul", "TFLOP/s", PUBLISHED_BF16_TFLOPS),
        ("triad_gbps", "memory triad", "GB/s", PUBLISHED_TRIAD_GBPS),
    ):
        value, reference, anchor = verify[key], plain[key], published(table, gpu_name)
        rows.append(
            row("verify", f"{label} {figure}", f"{value:.4g} {unit}",
                f">= {OF_PLAIN_LOOP:.0%} of a plain loop's {reference:.4g}",
                judge.fast(value >= OF_PLAIN_LOOP * reference),
                f"{value / reference:.1%} of the plain loop",
                published=f"{anchor:g} ({value / anchor:.0%})" if anchor else "-")
        )  # fmt: skip
    if "fp16" in verify:
        bf16, fp16 = verify["bf16"], verify["fp16"]
        apart = abs(fp16 - bf16) / bf16
        same_rate = any(card in (gpu_name or "") for card in SAME_FP16_BF16_RATE)
        rows.append(
            row("verify", f"{label} fp16 vs bf16 matmul",
                f"fp16 {fp16:.4g}, bf16 {bf16:.4g} TFLOP/s ({apart:.1%} apart)",
                f"within {FP16_BF16_APART:.0%} on Hopper",
                judge.fast(apart <= FP16_BF16_APART) if same_rate else "INFO")
        )  # fmt: skip
    return rows


def compile_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    cold, warm = f["cold"], f["warm"]
    hits = warm["cache"].get("fxgraph_cache_hit", 0)
    misses = warm["cache"].get("fxgraph_cache_miss", 0)
    return [
        row("compile", "torch.compile first step, cold cache", f"{cold['first_step_s']:.1f} s",
            "reported", "INFO"),
        row("compile", "torch.compile first step, second run", f"{warm['first_step_s']:.1f} s",
            "reported", "INFO"),
        row("compile", "compile cache on the second run", f"FX graph cache {hits} hit(s), "
            f"{misses} miss(es)", "hits, no misses", judge.correct(hits > 0 and misses == 0)),
    ]  # fmt: skip


def training_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    speedup, overhead = f["speedup_defaults_vs_naive"], f["ddp_overhead_percent"]
    return [
        row("training", "example defaults vs naive fp32 eager", f"{speedup:.2f}x "
            f"({f['images_per_s_defaults']:.0f} vs {f['images_per_s_naive_fp32_eager']:.0f} "
            "images/s)", f">= {DEFAULTS_MIN_SPEEDUP:g}x",
            judge.fast(speedup >= DEFAULTS_MIN_SPEEDUP)),
        row("training", "DDP, one process, vs the plain model", f"{overhead:+.1f} %",
            f"<= {DDP_MAX_OVERHEAD_PERCENT:g} % slower",
            judge.fast(overhead <= DDP_MAX_OVERHEAD_PERCENT)),
    ]  # fmt: skip


def resume_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    exact = f["deterministic"]
    tolerance = 0.0 if exact else LOSS_RTOL_NONDETERMINISTIC
    mode = "deterministic algorithms " + ("on" if exact else "off")
    same = f["loss_steps_compared"] == f["steps"] and f["max_loss_rel_diff"] <= tolerance
    equal = f["weights_bitwise_equal"]
    return [
        row("resume", "FSDP2 sharded checkpoints on disk", f"{f['shard_files']} shard file(s)",
            "some", judge.correct(f["shard_files"] > 0)),
        row("resume", "loss curve after kill and resume", f"resumed from step "
            f"{f['resumed_from']}; {f['loss_steps_compared']}/{f['steps']} steps, max "
            f"difference {f['max_loss_rel_diff']:.2%}", f"within {tolerance:.0%} ({mode})",
            judge.correct(same)),
        row("resume", "weights after kill and resume", "bitwise equal" if equal else
            f"{f['tensors_different']} tensor(s) differ", f"bitwise equal where deterministic "
            f"({mode})", judge.correct(equal) if exact else ("PASS" if equal else "INFO")),
    ]  # fmt: skip


def modes_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    """Each compile mode's images/s beside the default's, shown; a mode the example offers that
    does not run under DDP, or (on a GPU) runs without its CUDA graphs, fails. One that ran out
    of its time (a cold max-autotune compile) is shown as that."""
    rows, default = [], (f.get("default") or {}).get("images_per_s")
    for mode, m in f.items():
        name = f"`--compile-mode {mode}` under DDP"
        if "failed" in m:
            verdict = "INFO" if m["timed_out"] else "FAIL"
            rows.append(row("modes", name, "-", "runs", verdict, m["failed"]))
            continue
        against = f" ({m['images_per_s'] / default:.2f}x default)" if default else ""
        warm = m["cache"]["fxgraph_cache_miss"] == 0  # what an earlier part compiled, loaded
        rows.append(
            row("modes", name, f"{m['images_per_s']:.0f} images/s{against}", "reported", "INFO",
                f"first step ({'from the cache' if warm else 'a cold compile'}) "
                f"{m['first_step_s']:.1f} s")
        )  # fmt: skip
        if mode in CUDA_GRAPH_MODES:
            graphs = m["cudagraphs"]
            rows.append(
                row("modes", f"`--compile-mode {mode}` CUDA graphs", f"{graphs['graphs']} "
                    f"graph(s) in CUDA graphs ({graphs['recordings']} recording(s)), "
                    f"{graphs['skipped']} without", "every graph in CUDA graphs",
                    judge.fast(graphs["graphs"] > 0 and graphs["skipped"] == 0),
                    m["skip_reason"] or "")
            )  # fmt: skip
    return rows


def checkpoint_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    return [
        row("checkpoint", "checkpoint save vs raw disk write", f"{f['save_vs_raw']:.2f}",
            f">= {SAVE_MIN_FRACTION_OF_RAW:g} of raw", judge.fast(f["save_vs_raw"] >=
            SAVE_MIN_FRACTION_OF_RAW)),
        row("checkpoint", "checkpoint load vs raw disk read", f"{f['load_vs_raw']:.2f}",
            "reported", "INFO"),
    ]  # fmt: skip


def tests_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    cases = f["cases"]
    outcomes = [case["outcome"] for case in cases.values()]
    failed = [name for name, case in cases.items() if case["outcome"] == "failed"]
    skipped = sorted({o.removeprefix("skipped: ") for o in outcomes if o.startswith("skipped")})
    skips = sum(outcome.startswith("skipped") for outcome in outcomes)
    counts = f"{outcomes.count('passed')} passed, {len(failed)} failed, {skips} skipped"
    verdict = "FAIL" if failed else ("SKIP" if skipped and not outcomes.count("passed") else "PASS")
    nvml_case = cases.get(NVML_TEST, {"outcome": "not run"})
    nvml_verdict = {"passed": "PASS", "failed": "FAIL"}.get(nvml_case["outcome"], "SKIP")
    return [
        row("tests", "`pytest -m gpu tests/gpu`", counts, "all pass", verdict,
            "; ".join(failed or skipped)),
        row("tests", "NVML verdicts vs nvidia-smi", nvml_case.get("compared", "-"),
            "the same facts and verdicts", nvml_verdict, nvml_case["outcome"]),
    ]  # fmt: skip


TARGETS: dict[str, Callable[[dict[str, Any], Judge, str | None], list[dict]]] = {
    "verify": verify_rows,
    "compile": compile_rows,
    "training": training_rows,
    "resume": resume_rows,
    "checkpoint": checkpoint_rows,
    "tests": tests_rows,
    "modes": modes_rows,
}
