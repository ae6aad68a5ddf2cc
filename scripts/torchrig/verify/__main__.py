"""`python -m torchrig.verify [options]`: the same as `torchrig verify`, without the dispatcher."""

from __future__ import annotations

import argparse
import sys

from torchrig.verify import cli


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchrig.verify", description=cli.__doc__)
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
