"""`python -m torchrig.verify [options]`: the same as `torchrig verify`."""

from __future__ import annotations

import sys

from torchrig.cli import main

if __name__ == "__main__":
    sys.exit(main(["verify", *sys.argv[1:]]))
