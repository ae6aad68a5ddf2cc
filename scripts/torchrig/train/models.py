"""Models for the training example and the benchmarks: torchvision's (imported only when asked
for), or a tiny built-in CNN."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor, nn

TINY = "tiny"


class TorchvisionUnavailable(RuntimeError):
    """A torchvision model or dataset was asked for, but torchvision cannot be imported."""


def import_torchvision(what: str) -> Any:
    try:
        import torchvision
    except Exception as exc:  # ImportError, or a torch/torchvision build mismatch (RuntimeError)
        raise TorchvisionUnavailable(
            f"{what} needs torchvision, which cannot be imported here "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'}). "
            "Install the torchvision build that matches torch, or use `--model tiny` with "
            "synthetic data."
        ) from exc
    return torchvision


@functools.cache
def tiny_convnet_class() -> type[nn.Sequential]:
    """A Sequential (its parameters' names) with a forward of its own: torch.compile of the
    DDP-wrapped model starts again at the model's forward and compiles nothing when that is
    torch.nn's own, as nn.Sequential's is. Made at first use, so that torch is imported only
    then; `torchrig.train.models.TinyConvNet` names it (pickle finds a whole saved model there)."""
    from torch import nn

    class TinyConvNet(nn.Sequential):
        def forward(self, x: Tensor) -> Tensor:
            for layer in self:
                x = layer(x)
            return x

    TinyConvNet.__qualname__ = TinyConvNet.__name__
    return TinyConvNet


def __getattr__(name: str) -> Any:
    if name == "TinyConvNet":
        return tiny_convnet_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tiny_convnet(num_classes: int) -> nn.Module:
    """Three conv blocks with BatchNorm: trains in seconds on a CPU, no dropout (deterministic)."""
    from torch import nn

    def block(cin: int, cout: int, stride: int) -> list[nn.Module]:
        return [
            nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        ]

    return tiny_convnet_class()(
        *block(3, 16, 1),
        *block(16, 32, 2),
        *block(32, 64, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, num_classes),
    )


def build_model(name: str, num_classes: int) -> nn.Module:
    """`tiny`, or any torchvision classification model by name (resnet18, resnet50, vit_b_16...)."""
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    if name == TINY:
        return tiny_convnet(num_classes)
    torchvision = import_torchvision(f"--model {name}")
    available = torchvision.models.list_models(module=torchvision.models)
    if name not in available:
        raise ValueError(
            f"unknown model {name!r}: use `tiny` or a torchvision classification model "
            "(resnet18, resnet50, vit_b_16, ...; torchvision.models.list_models() has them all)"
        )
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
