"""The models: the tiny CNN compiles under DDP, as torchvision's models do."""

from __future__ import annotations

import torch
from torchrig.train.distributed import init_distributed, shutdown_distributed, wrap_ddp
from torchrig.train.models import build_model


def test_the_tiny_model_compiles_under_ddp_as_the_example_compiles_it() -> None:
    """torch.compile(DDP(model)), the example's order and the tutorials': Dynamo leaves DDP's
    own forward alone and starts again in the model's, which it skips when that forward is one
    of torch.nn's own (nn.Sequential's): then nothing at all is compiled, in any mode."""
    from torch._dynamo.utils import counters

    init_distributed("cpu", environ={})
    try:
        torch._dynamo.reset()
        counters.clear()
        model = torch.compile(wrap_ddp(build_model("tiny", 4)), backend="eager")
        model(torch.randn(2, 3, 8, 8)).sum().backward()
        assert counters["stats"]["unique_graphs"] >= 1, dict(counters["graph_break"])
    finally:
        torch._dynamo.reset()
        shutdown_distributed()


def test_the_tiny_model_keeps_the_names_of_a_plain_sequential() -> None:
    # Checkpoints of earlier runs hold these names: they must still load.
    names = list(build_model("tiny", 4).state_dict())
    assert names[:3] == ["0.weight", "1.weight", "1.bias"] and names[-1] == "11.bias"


def test_the_tiny_model_pickles_whole_as_a_plain_sequential_did() -> None:
    import io

    model = build_model("tiny", 4)
    buffer = io.BytesIO()
    torch.save(model, buffer)  # a whole model, as some users save theirs
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded) is type(model)
    pairs = zip(loaded.state_dict().values(), model.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)
