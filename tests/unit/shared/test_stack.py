"""The stack's pins: made from what the image installed, read back, and found in a refusal."""

from __future__ import annotations

from pathlib import Path

from torchrig.shared import stack

PINNED = {"torch": "2.13.0", "triton": "3.7.1", "nvidia-nccl-cu13": "2.29.7"}
# What pip 26.3 and uv 0.13.9 printed in the image when asked for another torch.
PIP_REFUSAL = """\
ERROR: Cannot install torch==2.12.0 because these package versions have conflicting dependencies.

The conflict is caused by:
    The user requested torch==2.12.0
    The user requested (constraint) torch==2.13.0
"""
UV_REFUSAL = """\
error: No solution found when resolving dependencies
  cause: Because you require torch==2.12.0 and torch==2.13.0, we can conclude that your \
requirements are unsatisfiable.
"""


def test_the_stack_is_torch_torchvision_triton_and_the_nvidia_libraries() -> None:
    for name in ("torch", "TorchVision", "triton", "nvidia-cublas", "Nvidia_NCCL.cu13"):
        assert stack.is_protected(name), name
    for name in ("numpy", "torch-ema", "torchmetrics", "pytorch-lightning", "tritonclient"):
        assert not stack.is_protected(name), name


def test_pins_keep_only_the_stack_and_survive_the_round_trip_through_the_file() -> None:
    installed = [("torch", "2.13.0"), ("numpy", "2.4.6"), ("nvidia_nccl_cu13", "2.29.7"),
                 ("triton", "3.7.1")]  # fmt: skip
    pinned = stack.pins(installed)
    assert pinned == PINNED
    text = stack.constraints_text(pinned)
    assert text.startswith("# The image's PyTorch stack")
    assert "nvidia-nccl-cu13==2.29.7\ntorch==2.13.0\ntriton==3.7.1\n" in text
    assert stack.read_pins(text) == PINNED


def test_installed_reads_a_site_packages_folder(tmp_path: Path) -> None:
    dist = tmp_path / "torch-2.13.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
    assert stack.installed(str(tmp_path)) == [("torch", "2.13.0")]


def test_a_refusal_names_the_pins_it_ran_into() -> None:
    assert stack.refused(PIP_REFUSAL, PINNED) == ["torch"]
    assert stack.refused(UV_REFUSAL, PINNED) == ["torch"]


def test_a_failure_that_quotes_no_pin_names_none() -> None:
    other = "ERROR: No matching distribution found for not-a-package==1.0\n"
    assert stack.refused(other, PINNED) == []
    # The version the user asked for is not the pin.
    assert stack.refused("The user requested torch==2.12.0\n", PINNED) == []


def test_the_hint_names_the_package_the_variable_and_the_way_back() -> None:
    hint = stack.override_hint(["torch"], PINNED, "pip")
    assert "kept torch 2.13.0" in hint
    assert "`PIP_CONSTRAINT= pip install ...`" in hint
    assert "make packages-reset" in hint and "\n" not in hint
    assert "`UV_CONSTRAINT= uv pip install ...`" in stack.override_hint(["torch"], PINNED, "uv")
