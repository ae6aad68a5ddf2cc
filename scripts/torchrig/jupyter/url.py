"""Print the JupyterLab URL with its token (`make jupyter-url`).

Run inside the container. `--published HOST:PORT` is where the host reaches Jupyter (what
`docker compose port workstation 8888` prints); without it the in-container address is used.
"""

from __future__ import annotations

import argparse
import os
import sys

from torchrig.image.jupyter import browser_address, lab_url
from torchrig.image.settings import SetupError, bind_address
from torchrig.image.state import read_token, readable_state_dir
from torchrig.shared import ports
from torchrig.shared.ownership import FileNotRead
from torchrig.shared.voice import MAKEFILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--published", help="default: where Jupyter listens (BIND_ADDR)")
    args = parser.parse_args(argv)
    try:
        where = args.published or f"{bind_address(os.environ)}:{ports.JUPYTER.container}"
    except SetupError as exc:
        MAKEFILE.error(str(exc))
        return 1
    try:
        token = read_token(readable_state_dir())
    except FileNotRead as exc:
        MAKEFILE.error(f"the Jupyter token file is not the container's own: {exc}")
        return 1
    if token is None:
        MAKEFILE.error(
            "no Jupyter token yet: is the container up with SERVICES including jupyter? "
            "(see `make logs`)"
        )
        return 1
    print(lab_url(browser_address(where), token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
