"""`torchrig ckpt`: list and export checkpoints. Standard library only at module level
(the dispatcher imports it to build its parser). A checkpoint holds what its writer chose (root
may inspect dev's): all of it reaches the terminal through voice.harmless."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from torchrig.checkpoint import CheckpointError
from torchrig.shared.voice import Voice, harmless, size_text

VOICE = Voice.of_command("ckpt")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ckpt_command", metavar="ACTION", required=True)

    ls = sub.add_parser("ls", help="list the checkpoints in a directory")
    ls.add_argument("directory", type=Path, metavar="DIR")
    ls.add_argument(
        "--verify", action="store_true", help="check CRCs and unpickle every file (slower)"
    )
    ls.set_defaults(_ckpt=_ls)

    export = sub.add_parser(
        "export", help="write the latest good checkpoint's weights as a plain state_dict"
    )
    export.add_argument("directory", type=Path, metavar="DIR", help="a checkpoint dir or file")
    export.add_argument("out", type=Path, metavar="OUT.pt")
    export.add_argument("--force", action="store_true", help="replace OUT.pt if it exists")
    export.set_defaults(_ckpt=_export)


def run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():
        # Skipped bad files are worth a line each, not Python's file:line warning format.
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *_a, **_k: VOICE.warning(harmless(str(message)))
        try:
            return int(args._ckpt(args))
        except CheckpointError as exc:
            VOICE.error(harmless(str(exc)))
            return 1
        except BrokenPipeError:
            # `torchrig ckpt ls DIR | head`: the reader left; stop quietly, as other tools do.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141


def _ls(args: argparse.Namespace) -> int:
    from torchrig.checkpoint.manager import CheckpointManager

    directory: Path = args.directory
    if not directory.exists():
        raise CheckpointError(f"{directory}: no such directory")
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: not a directory")
    rows = [
        (
            str(info.step),
            harmless(info.path.name + ("/" if info.path.is_dir() else "")),
            size_text(info.size_bytes),
            "*" if info.is_latest else "",
            "ok" if info.ok else harmless(f"corrupt: {info.error}"),
        )
        for info in CheckpointManager(directory).list(verify=args.verify)
    ]
    if not rows:
        raise CheckpointError(f"{directory}: no checkpoints (step_*.pt files or step_* folders)")
    table = [("STEP", "FILE", "SIZE", "LATEST", "STATUS"), *rows]
    widths = [max(len(cell) for cell in column) for column in zip(*table, strict=True)]
    for row in table:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
    return 0 if all(row[4] == "ok" for row in rows) else 2


def _export(args: argparse.Namespace) -> int:
    import torch

    from torchrig.checkpoint.directory import atomic_write
    from torchrig.checkpoint.manager import load_model_weights

    source: Path = args.directory
    out: Path = args.out
    if out.exists() and not args.force:
        raise CheckpointError(f"{out} exists; pass --force to replace it")
    if out.is_dir():
        raise CheckpointError(f"{out} is a directory; give a file name such as model.pt")
    if not out.parent.is_dir():
        raise CheckpointError(f"{out.parent}: no such directory")
    weights = {k: v.detach().cpu() for k, v in load_model_weights(source).items()}
    for key, tensor in weights.items():
        # A view into a larger storage would drag the whole storage into the file: copy those.
        if tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size():
            weights[key] = tensor.clone()
    atomic_write(out, lambda f: torch.save(weights, f))
    print(f"wrote {out}: {len(weights)} tensors, {size_text(out.stat().st_size)}")
    return 0
