"""The GPU report's judgement of its parts' figures: targets met or missed on a GPU, only shown
on a CPU, a part that did not finish."""

from __future__ import annotations

from typing import Any

from benchmarks.gpu_report import targets

H100 = "NVIDIA H100 80GB HBM3"
JUDGE = targets.Judge(cpu=False)


def verify_figures(
    bf16: float, triad: float, quick_s: float = 2.0, fp16: float | None = None, label: str = "GPU0"
) -> dict[str, Any]:
    """The verify part's figures: verify's method measured `bf16` and `triad` (and `fp16`);
    the plain loop in the same process 787.2 TFLOP/s and 3042 GB/s, as on the first H100."""
    clean = {"summary": {"PASS": 9}, "failed": []}
    measured = {"bf16": bf16, "triad_gbps": triad} | ({} if fp16 is None else {"fp16": fp16})
    return {
        "quick": {**clean, "seconds": quick_s},
        "full": {**clean, "seconds": 40.0},
        "figures": {"label": label, "verify": measured,
                    "plain": {"bf16": 787.2, "fp16": 780.0, "triad_gbps": 3042.0}},
        "allreduce": {"verdict": "PASS", "world": 1, "correct": True, "best_algbw_gbps": 310.0},
    }  # fmt: skip


def rows_of(figures: dict[str, Any], cpu: bool = False, gpu: str | None = H100) -> dict:
    parts = {"verify": {"status": "ok", "figures": figures, "reason": None}}
    return {row["name"]: row for row in targets.targets(parts, gpu, cpu)}


def verdicts(figures: dict[str, Any], cpu: bool = False, gpu: str | None = H100) -> dict:
    return {name: row["verdict"] for name, row in rows_of(figures, cpu, gpu).items()}


def test_verify_is_judged_against_a_plain_loop_with_the_published_runs_beside_it() -> None:
    # The first H100 run: verify 746.8 against the plain loop's 787.2 is 94.9 %: under 98 %.
    first_run = rows_of(verify_figures(bf16=746.8, triad=3050.0, quick_s=6.5))
    matmul = first_run["GPU0 bf16 matmul"]
    assert matmul["verdict"] == "FAIL" and matmul["note"] == "94.9% of the plain loop"
    assert matmul["goal"] == ">= 98% of a plain loop's 787.2"
    assert matmul["published"] == "794.5 (94%)"
    assert first_run["GPU0 memory triad"]["verdict"] == "PASS"
    assert first_run["GPU0 memory triad"]["published"] == "2970 (103%)"
    assert first_run["`torchrig verify --quick` wall time"]["verdict"] == "FAIL"  # over 3 s
    good = verdicts(verify_figures(bf16=780.0, triad=3000.0))
    assert good["GPU0 bf16 matmul"] == good["GPU0 memory triad"] == "PASS"
    assert good["`torchrig verify --quick` wall time"] == "PASS"
    assert good["all-reduce sums"] == "PASS" and good["all-reduce algbw"] == "INFO"


def test_fp16_and_bf16_must_agree_on_hopper_only() -> None:
    apart = verdicts(verify_figures(bf16=746.8, triad=3000.0, fp16=676.0))
    assert apart["GPU0 fp16 vs bf16 matmul"] == "FAIL"  # 9.5 % apart: the method, not the card
    close = rows_of(verify_figures(bf16=780.0, triad=3000.0, fp16=770.0))
    assert close["GPU0 fp16 vs bf16 matmul"]["verdict"] == "PASS"
    assert "(1.3% apart)" in close["GPU0 fp16 vs bf16 matmul"]["measured"]
    other_card = verdicts(verify_figures(bf16=100.0, triad=500.0, fp16=60.0), gpu="NVIDIA L4")
    assert other_card["GPU0 fp16 vs bf16 matmul"] == "INFO"


def test_on_a_cpu_figures_are_shown_not_judged() -> None:
    on_cpu = rows_of(verify_figures(bf16=0.01, triad=10.0, quick_s=9.0, label="cpu"), True, None)
    assert on_cpu["cpu bf16 matmul"]["verdict"] == "INFO"
    assert on_cpu["`torchrig verify --quick` wall time"]["verdict"] == "INFO"
    assert on_cpu["cpu memory triad"]["published"] == "-"


def test_a_part_that_did_not_finish_is_one_failed_row() -> None:
    parts = {"training": {"status": "failed", "figures": {}, "reason": "exit 1: CUDA OOM"}}
    (row,) = targets.targets(parts, H100, cpu=False)
    assert row["verdict"] == "FAIL" and row["note"] == "exit 1: CUDA OOM"


def test_the_gpu_tests_give_their_counts_and_the_nvml_comparison_its_own_row() -> None:
    cases = {
        "test_nvml_verdicts_match_nvidia_smi": {
            "outcome": "passed", "compared": "12 check(s) on 1 GPU(s)"},
        "test_fsdp2": {"outcome": "failed"},
        "test_quick": {"outcome": "skipped: CUDA is not available"},
    }  # fmt: skip
    rows = {row["name"]: row for row in targets.tests_rows({"cases": cases}, JUDGE, H100)}
    nvml = rows["NVML verdicts vs nvidia-smi"]
    assert nvml["verdict"] == "PASS" and nvml["measured"] == "12 check(s) on 1 GPU(s)"
    tests = rows["`pytest -m gpu tests/gpu`"]
    assert tests["verdict"] == "FAIL" and tests["measured"] == "1 passed, 1 failed, 1 skipped"
    assert tests["note"] == "test_fsdp2"
    only_skipped = {"test_quick": cases["test_quick"]}
    rows = {row["name"]: row for row in targets.tests_rows({"cases": only_skipped}, JUDGE, H100)}
    assert rows["`pytest -m gpu tests/gpu`"]["verdict"] == "SKIP"
    assert rows["NVML verdicts vs nvidia-smi"]["verdict"] == "SKIP"


def modes_figures(graphs: int = 12, skips: int = 0, reason: str | None = None) -> dict[str, Any]:
    def ran(rate: float, first: float) -> dict[str, Any]:
        cudagraphs = {"graphs": graphs, "recordings": graphs, "skipped": skips}
        cache = {"fxgraph_cache_hit": 0, "fxgraph_cache_miss": 2}
        return {"images_per_s": rate, "first_step_s": first, "cudagraphs": cudagraphs,
                "cache": cache, "skip_reason": reason}  # fmt: skip

    return {"default": ran(3000.0, 31.0), "reduce-overhead": ran(3600.0, 35.0),
            "max-autotune": ran(3900.0, 190.0)}  # fmt: skip


def modes_rows(figures: dict[str, Any], cpu: bool = False) -> dict[str, dict]:
    parts = {"modes": {"status": "ok", "reason": None, "figures": figures}}
    return {row["name"]: row for row in targets.targets(parts, H100, cpu)}


def test_each_compile_mode_is_shown_against_the_default_and_its_cuda_graphs_judged() -> None:
    rows = modes_rows(modes_figures())
    default, autotune = rows["`--compile-mode default` under DDP"], rows[
        "`--compile-mode max-autotune` under DDP"]  # fmt: skip
    assert default["verdict"] == "INFO" and default["measured"] == "3000 images/s (1.00x default)"
    assert autotune["measured"] == "3900 images/s (1.30x default)"
    assert autotune["note"] == "first step (a cold compile) 190.0 s"
    # On a CPU the compile part compiled the default's graph already (the same tiny model).
    figures = modes_figures()
    figures["default"]["cache"] = {"fxgraph_cache_hit": 2, "fxgraph_cache_miss": 0}
    note = modes_rows(figures)["`--compile-mode default` under DDP"]["note"]
    assert note == "first step (from the cache) 31.0 s"
    assert "`--compile-mode default` CUDA graphs" not in rows  # the default mode has none
    for mode in ("reduce-overhead", "max-autotune"):
        graphs = rows[f"`--compile-mode {mode}` CUDA graphs"]
        assert graphs["verdict"] == "PASS"
        assert graphs["measured"] == "12 graph(s) in CUDA graphs (12 recording(s)), 0 without"


def test_a_mode_that_runs_without_its_cuda_graphs_fails_on_a_gpu_and_is_shown_on_a_cpu() -> None:
    reason = "mutated inputs (2 instances)"
    rows = modes_rows(modes_figures(graphs=10, skips=2, reason=reason))
    graphs = rows["`--compile-mode reduce-overhead` CUDA graphs"]
    assert (graphs["verdict"], graphs["note"]) == ("FAIL", reason)
    assert rows["`--compile-mode max-autotune` CUDA graphs"]["verdict"] == "FAIL"
    # None at all, as on a CPU, where such a mode compiles as the default without a word.
    assert modes_rows(modes_figures(graphs=0))[
        "`--compile-mode reduce-overhead` CUDA graphs"]["verdict"] == "FAIL"  # fmt: skip
    on_cpu = modes_rows(modes_figures(graphs=0), cpu=True)
    assert on_cpu["`--compile-mode reduce-overhead` CUDA graphs"]["verdict"] == "INFO"


def test_a_mode_that_breaks_fails_one_out_of_time_is_shown_and_so_is_an_unstarted_part() -> None:
    figures = modes_figures()
    figures["reduce-overhead"] = {"failed": "exit 1: RuntimeError: boom", "timed_out": False}
    figures["max-autotune"] = {"failed": "killed at its deadline: autotuning", "timed_out": True}
    rows = modes_rows(figures)
    broken = rows["`--compile-mode reduce-overhead` under DDP"]
    assert (broken["verdict"], broken["note"]) == ("FAIL", "exit 1: RuntimeError: boom")
    assert rows["`--compile-mode max-autotune` under DDP"]["verdict"] == "INFO"
    # Last in the report, with the time left: not started is no failure of the card.
    parts = {"modes": {"status": "failed", "reason": "not started: the report's 410 s were "
                       "spent", "figures": {}}}  # fmt: skip
    [row] = targets.targets(parts, H100, cpu=False)
    assert row["verdict"] == "INFO"
