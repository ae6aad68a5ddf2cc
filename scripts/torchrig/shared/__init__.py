"""What both sides of Docker read alike (the host's helpers, the image's start, its `.pth` hooks and
the commands; the kept venv and the pinned stack, which the start prepares and `torchrig packages`
reads): standard library only, and nothing else of torchrig."""
