"""Spec-sheet peaks: dense tensor-core TFLOP/s (fp32 accumulation) and memory GB/s (10^9 bytes).
Hopper and Blackwell sheets print TFLOP/s "with sparsity": the dense ones here are half of those.
A GH200 runs at other bandwidths, so it is left out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Peak:
    model: str
    bf16_tflops: float | None  # None: no bf16 tensor cores (V100)
    fp16_tflops: float
    tf32_tflops: float | None  # None: no tf32 tensor cores (V100)
    memory_gbps: float


# (words the normalised name must contain, words it must not contain, peak). First match wins,
# so the more specific entries come first.
PEAKS: tuple[tuple[tuple[str, ...], tuple[str, ...], Peak], ...] = (
    (("b200",), (), Peak("B200", 2250.0, 2250.0, 1100.0, 8000.0)),
    (("h200", "nvl"), (), Peak("H200 NVL", 835.5, 835.5, 417.5, 4800.0)),
    (("h200",), (), Peak("H200 SXM", 989.4, 989.4, 494.7, 4800.0)),
    (("h100", "nvl"), (), Peak("H100 NVL", 835.5, 835.5, 417.5, 3900.0)),
    (("h100", "pcie"), (), Peak("H100 PCIe", 756.5, 756.5, 378.0, 2000.0)),
    (("h100",), (), Peak("H100 SXM", 989.4, 989.4, 494.7, 3350.0)),
    (("a100", "80gb", "pcie"), (), Peak("A100 80GB PCIe", 312.0, 312.0, 156.0, 1935.0)),
    (("a100", "80gb"), (), Peak("A100 80GB SXM", 312.0, 312.0, 156.0, 2039.0)),
    (("a100", "pcie"), (), Peak("A100 40GB PCIe", 312.0, 312.0, 156.0, 1555.0)),
    (("a100",), (), Peak("A100 40GB SXM", 312.0, 312.0, 156.0, 1555.0)),
    (("l40s",), (), Peak("L40S", 362.0, 362.0, 183.0, 864.0)),
    (("l40",), (), Peak("L40", 181.0, 181.0, 90.5, 864.0)),
    (("l4",), (), Peak("L4", 121.0, 121.0, 60.0, 300.0)),
    (("a40",), (), Peak("A40", 149.7, 149.7, 74.8, 696.0)),
    (("a10",), ("a100", "a10g"), Peak("A10", 125.0, 125.0, 62.5, 600.0)),
    (("rtx", "6000", "ada"), (), Peak("RTX 6000 Ada", 364.2, 364.2, 182.1, 960.0)),
    (("rtx", "a6000"), (), Peak("RTX A6000", 154.8, 154.8, 77.4, 768.0)),
    (("rtx", "4090"), (), Peak("GeForce RTX 4090", 165.2, 165.2, 82.6, 1008.0)),
    (("v100", "sxm"), (), Peak("V100 SXM2", None, 125.0, None, 900.0)),
    (("v100",), (), Peak("V100 PCIe", None, 112.0, None, 900.0)),
)


def peak_for(name: str) -> Peak | None:
    # 'NVIDIA A100-SXM4-80GB' -> ['nvidia', 'a100', 'sxm4', '80gb']
    words = "".join(char if char.isalnum() else " " for char in name.lower()).split()

    def has(word: str) -> bool:
        # "sxm" matches "sxm4"/"sxm5"; model numbers must match whole words ("l4" is not "l40").
        if word in ("sxm", "pcie"):
            return any(candidate.startswith(word) for candidate in words)
        return word in words

    for required, excluded, peak in PEAKS:
        if all(has(word) for word in required) and not any(has(word) for word in excluded):
            return peak
    return None
