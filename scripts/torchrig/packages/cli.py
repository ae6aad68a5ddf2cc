"""`torchrig packages`: list the kept packages (`make packages`), or remove them all and start
afresh (`torchrig packages reset`, `make packages-reset`). Runs as dev."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from torchrig.shared import kept, places
from torchrig.shared.voice import Voice

VOICE = Voice("torchrig packages:")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=("list", "reset"),
        default="list",
        help="list (the default) or reset: remove every kept package, of every Python",
    )


def run(args: argparse.Namespace, root: Path = Path(places.KEPT_ROOT)) -> int:
    if os.geteuid() == 0:
        VOICE.error(
            "run it as dev, whose packages they are "
            "(`make packages`, `make packages-reset`, or `docker compose exec -u dev ...`)"
        )
        return 2
    if args.action == "reset":
        return reset(root)
    return show(root)


def show(root: Path) -> int:
    prefix = Path(places.kept_prefix(str(root)))
    dists = kept.kept_dists(kept.kept_site(prefix))
    print(f"Kept packages in {prefix}: {len(dists)}")
    for dist in dists:
        print(f"  {dist.name} {dist.version}")
    return 0


def reset(root: Path) -> int:
    removed = kept.reset(root)
    prepared = kept.prepare(root)
    if prepared.prefix is None:
        VOICE.error(prepared.warnings[0])
        return 1
    print(
        f"Removed the kept packages ({', '.join(p.name for p in removed) or 'there were none'}); "
        f"a fresh venv for them is in {prepared.prefix}. Running programs keep what they "
        "imported: restart Jupyter's kernels (or `make down && make up`)."
    )
    return 0
