"""The stack's pins: made from what the image installed."""

from __future__ import annotations

from pathlib import Path

from torchrig.shared import stack

PINNED = {"torch": "2.13.0", "triton": "3.7.1", "nvidia-nccl-cu13": "2.29.7"}


def test_the_stack_is_torch_torchvision_triton_and_the_nvidia_libraries() -> None:
    for name in ("torch", "TorchVision", "triton", "nvidia-cublas", "Nvidia_NCCL.cu13"):
        assert stack.is_protected(name), name
    for name in ("numpy", "torch-ema", "torchmetrics", "pytorch-lightning", "tritonclient"):
        assert not stack.is_protected(name), name


def test_pins_keep_only_the_stack_and_are_written_one_a_line() -> None:
    installed = [("torch", "2.13.0"), ("numpy", "2.4.6"), ("nvidia_nccl_cu13", "2.29.7"),
                 ("triton", "3.7.1")]  # fmt: skip
    pinned = stack.pins(installed)
    assert pinned == PINNED
    text = stack.constraints_text(pinned)
    assert text.startswith("# The image's PyTorch stack")
    assert "nvidia-nccl-cu13==2.29.7\ntorch==2.13.0\ntriton==3.7.1\n" in text


def test_installed_reads_a_site_packages_folder(tmp_path: Path) -> None:
    dist = tmp_path / "torch-2.13.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
    assert stack.installed(str(tmp_path)) == [("torch", "2.13.0")]
