"""Jupyter's token, kept on the host: the same across `make up`, restarts and upgrades (an open
browser tab keeps working) until `make jupyter-token-rotate` makes a new one.

Its one place is `.env` (mode 600, yours alone; torchrig.host.dotenv), as JUPYTER_TOKEN: compose
hands it to the container, whose start uses it and never a token it finds in its state folder
(another user may have put one there). A token set in the environment is left as it is.

`python -m torchrig.host.jupyter_token --rotate` writes a new one (the Makefile's target then
runs `make up`, which recreates the container with it).
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path

from torchrig.host import dotenv
from torchrig.shared.voice import MAKEFILE as VOICE

VARIABLE = "JUPYTER_TOKEN"
COMMENT = (
    "Jupyter's token, kept across restarts and upgrades; `make jupyter-token-rotate` renews it"
)


def new_token() -> str:
    return secrets.token_hex(24)


def keep(env_file: Path = Path(".env")) -> None:
    """On `make up`: a token kept in `.env`, unless one is set or no token is wanted. Compose
    reading other files (COMPOSE_ENV_FILES): nothing written, and each start makes its own."""
    if dotenv.setting(VARIABLE, env_file):
        return
    token = new_token()
    if dotenv.set_value(env_file, VARIABLE, token, comment=COMMENT):
        os.environ[VARIABLE] = token  # compose in this run, whatever it read already
        VOICE.note(f"kept a new Jupyter token in {env_file} (readable by you alone)")


def rotate(env_file: Path = Path(".env")) -> int:
    """A new token in `.env`; an error, with nothing changed, where `.env` would not decide it."""
    if os.environ.get(VARIABLE):
        VOICE.error(
            f"{VARIABLE} is set in your environment, which wins over {env_file}: change it "
            "there (or unset it, and rotate again)"
        )
        return 1
    if not dotenv.set_value(env_file, VARIABLE, new_token(), comment=COMMENT):
        VOICE.error(
            f"COMPOSE_ENV_FILES is set: compose reads {VARIABLE} from those files, so set a "
            "new one there"
        )
        return 1
    VOICE.note(f"wrote a new Jupyter token to {env_file}: the old one no longer opens Jupyter")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rotate", action="store_true", required=True, help="a new token")
    parser.parse_args(argv)
    return rotate()


if __name__ == "__main__":
    sys.exit(main())
