"""Verdicts on measured figures, the CPU probes run for real, and the GPU path on a stand-in
torch that runs "cuda" work on the CPU (cpu_as_cuda.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from torchrig.facts.children import Outcome
from torchrig.facts.verdict import Verdict
from torchrig.verify import probes, speed
from torchrig.verify.peaks import peak_for

# The same method, in a few milliseconds: for tests that need a figure, not a good one.
FAST = speed.Timing(min_seconds=0.002, repeats=2, warmup_batch_s=0.001, warmup_max_s=0.005)


def test_matmul_figures_are_set_against_the_peak() -> None:
    peak = peak_for("NVIDIA H100 80GB HBM3")
    check = probes.matmul_check("GPU0", "H100", {"bf16": 700.0, "fp16": 710.0, "tf32": 380.0}, peak)
    assert check.verdict is Verdict.PASS
    assert "bf16 700 (71% of 989.4)" in check.summary
    assert check.data["fraction_of_peak"]["tf32"] == pytest.approx(380.0 / 494.7)


def test_matmul_far_under_peak_warns_naming_the_dtype() -> None:
    peak = peak_for("NVIDIA H100 80GB HBM3")
    check = probes.matmul_check("GPU0", "H100", {"bf16": 200.0, "fp16": 700.0}, peak)
    assert check.verdict is Verdict.WARN
    assert (check.fix or "").startswith("bf16 under 40% of peak")


def test_an_unknown_gpu_gets_absolute_numbers() -> None:
    check = probes.matmul_check("GPU0", "Mystery", {"bf16": 12.5}, None)
    assert check.verdict is Verdict.PASS
    assert "bf16 12.5" in check.summary and "not in the peak table" in check.summary
    assert check.data["fraction_of_peak"] == {}


def test_v100_bf16_has_no_peak_and_is_reported_absolute() -> None:
    check = probes.matmul_check(
        "GPU0", "V100", {"bf16": 20.0, "fp16": 100.0}, peak_for("Tesla V100-SXM2-32GB")
    )
    assert check.verdict is Verdict.PASS
    assert "bf16" not in check.data["fraction_of_peak"]


def test_memory_bandwidth_against_the_peak() -> None:
    peak = peak_for("NVIDIA H100 80GB HBM3")
    assert probes.bandwidth_check("GPU0", 2900.0, peak).verdict is Verdict.PASS
    low = probes.bandwidth_check("GPU0", 900.0, peak)
    assert low.verdict is Verdict.WARN
    assert "27% of 3350" in low.summary
    assert probes.bandwidth_check("GPU0", 900.0, None).summary == "triad 900 GB/s"


def test_the_compile_test_verdicts() -> None:
    ok = Outcome(0, '{"ok": true, "seconds": 3.5, "max_error": 0.0}\n', "")
    assert probes.compile_check(ok, 60, "cpu").verdict is Verdict.PASS
    no_compiler = Outcome(
        0, '{"ok": false, "error": "InvalidCxxCompiler: No working C++ compiler found"}\n', ""
    )
    check = probes.compile_check(no_compiler, 60, "cpu")
    assert check.verdict is Verdict.FAIL
    assert "build-essential" in (check.fix or "")
    crashed = probes.compile_check(Outcome(-11, "", "Segmentation fault\n"), 60, "cpu")
    assert crashed.verdict is Verdict.FAIL
    assert "Segmentation fault" in crashed.summary
    slow = probes.compile_check(Outcome(None, "", ""), 60, "cpu")
    assert slow.verdict is Verdict.WARN
    assert "--timeout" in (slow.fix or "")
    stuck = probes.compile_check(Outcome(None, "", "", stuck=True), 60, "cpu")
    assert "the compile test still alive after SIGKILL (stuck in the kernel" in stuck.summary


def test_cpu_figures_are_positive_numbers() -> None:
    torch = pytest.importorskip("torch")
    matmul, memory = probes.run_cpu_figures(torch, size=128, timing=FAST)
    assert all(value > 0 for value in matmul.data["tflops"].values())
    assert memory.data["gbps"] > 0


# --- the GPU path, on a stand-in torch ---------------------------------------------------------


def cpu_as_cuda() -> Any:
    pytest.importorskip("torch")
    from .cpu_as_cuda import CpuAsCuda

    return CpuAsCuda()


def test_gpu_figures_are_measured_and_set_against_the_peak() -> None:
    fake = cpu_as_cuda()
    matmul, memory = probes.run_gpu_figures(
        fake, 3, "NVIDIA H100 80GB HBM3", "GPU3", size=64, timing=FAST
    )
    assert fake.cuda.devices_entered == [3]
    assert fake.cuda.cache_emptied == 1
    assert matmul.name == "GPU3 matmul"
    assert set(matmul.data["tflops"]) == {"bf16", "fp16", "tf32"}
    assert all(value > 0 for value in matmul.data["tflops"].values())
    assert matmul.data["peak_model"] == "H100 SXM"
    # A CPU is far below an H100's peak: the verdict must say so.
    assert matmul.verdict is Verdict.WARN
    assert memory.name == "GPU3 memory"
    assert memory.data["gbps"] > 0
    assert memory.data["fraction_of_peak"] < 0.4


def test_tf32_is_set_only_for_the_tf32_figure_and_put_back() -> None:
    torch = pytest.importorskip("torch")
    before = torch.backends.cuda.matmul.allow_tf32
    seen: list[bool] = []
    fake = cpu_as_cuda()
    real_matmul = torch.matmul

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return real_matmul(*args, **kwargs)

    fake.matmul = spy  # type: ignore[attr-defined]
    speed.matmul_tflops(fake, "cuda:0", "tf32", 16, FAST)
    speed.matmul_tflops(fake, "cuda:0", "bf16", 16, FAST)
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert True in seen and set(seen) == {True, False}


def test_a_probe_that_runs_out_of_memory_is_a_fail_not_a_traceback() -> None:
    fake = cpu_as_cuda()

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("CUDA out of memory. Tried to allocate 256.00 MiB")

    fake.randn = out_of_memory  # type: ignore[method-assign]
    (check,) = probes.run_gpu_figures(fake, 0, "NVIDIA H100 80GB HBM3", "GPU0")
    assert check.verdict is Verdict.FAIL
    assert "CUDA out of memory" in check.summary


def test_the_torch_cuda_calls_the_gpu_path_makes_exist_in_real_torch() -> None:
    """The stand-in could hide a misspelt call; real torch (even a CPU build) cannot."""
    torch = pytest.importorskip("torch")
    for name in (
        "Event",
        "device",
        "mem_get_info",
        "empty_cache",
        "is_bf16_supported",
        "get_arch_list",
        "get_device_properties",
        "device_count",
        "is_available",
        "synchronize",
        "set_device",
    ):
        assert hasattr(torch.cuda, name), name
    assert hasattr(torch.cuda.nccl, "version")
    assert hasattr(torch.backends.cuda.matmul, "allow_tf32")
    assert hasattr(torch.backends.cudnn, "allow_tf32")


@pytest.mark.parametrize(
    ("error", "words"),
    [
        # A read-only image, a HOME that is not the user's.
        ("OSError: [Errno 30] Read-only file system: '/home/dev/.cache/torchinductor'",
         ("HOME", "TORCHINDUCTOR_CACHE_DIR")),
        # A home on a noexec mount: the compiled code is written but cannot be loaded.
        ("InductorError: OSError: /h/.cache/torchinductor/x.so: failed to map segment from "
         "shared object", ("noexec", "TORCHINDUCTOR_CACHE_DIR")),
    ],
)  # fmt: skip
def test_a_compile_cache_that_cannot_take_the_compile_is_said_with_the_variables_that_move_it(
    error: str, words: tuple[str, ...]
) -> None:
    outcome = Outcome(0, json.dumps({"ok": False, "error": error}) + "\n", "")
    check = probes.compile_check(outcome, 60, "cpu")
    assert check.verdict is Verdict.FAIL
    assert all(word in (check.fix or "") for word in words), check.fix
