"""What the Dockerfile declares once: the CUDA flavours, their bases, the default."""

from __future__ import annotations

from torchrig.host import dockerfile_facts

from .repo import DOCKERFILE, REPO


def test_dockerfile_declares_flavours_once_and_a_default_with_a_lock() -> None:
    flavours = dockerfile_facts.flavours(DOCKERFILE)
    assert len(flavours) == len(set(flavours)) >= 2
    default = dockerfile_facts.default_flavour(DOCKERFILE)
    assert default in flavours
    assert (REPO / "locks" / f"{default}.txt").is_file()


def test_every_flavour_uses_a_slim_base_image() -> None:
    bases = [line for line in DOCKERFILE.splitlines() if line.startswith("FROM nvidia/cuda:")]
    assert len(bases) == len(dockerfile_facts.flavours(DOCKERFILE))  # one base per flavour
    for line in bases:
        assert "-base-ubuntu24.04 AS cuda-cu" in line, line
