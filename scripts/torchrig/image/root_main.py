"""How root runs torchrig in the container, and the only way it does:

    /usr/bin/python3 -I -S /usr/lib/torchrig <entrypoint|healthcheck|endpoints|constraints> [...]

The image copies the package to /usr/lib/torchrig/torchrig, root-owned, and this file to its
__main__.py. -I -S keep the working directory (/workspace, dev's), PYTHON* variables and every
site-packages off sys.path, so no .pth file runs: root imports nothing dev can write.
"""

from __future__ import annotations

import os
import sys

USAGE = (
    "usage: python3 -I -S /usr/lib/torchrig entrypoint [command...] | healthcheck"
    " | endpoints [--wait S] [--jupyter ADDRESS] [--ssh ADDRESS] | constraints SITE_PACKAGES"
)


def main(argv: list[str]) -> int:
    command, args = (argv[0], argv[1:]) if argv else ("", [])
    if command == "entrypoint":
        from torchrig.image import entrypoint

        return entrypoint.main(args)
    if command == "healthcheck" and not args:
        from torchrig.image import healthcheck
        from torchrig.image.settings import SYSTEM_PATH

        os.environ["PATH"] = SYSTEM_PATH  # Docker gives it the image's PATH: system dirs only
        return healthcheck.main()
    if command == "endpoints":
        from torchrig.image import endpoints

        return endpoints.main(args)
    if command == "constraints" and len(args) == 1:
        from torchrig.shared import stack

        print(stack.constraints_text(stack.pins(stack.installed(args[0]))), end="")
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
