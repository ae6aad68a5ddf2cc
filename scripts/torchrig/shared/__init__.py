"""What both sides of Docker read alike (the host's helpers, the image's start, its `.pth` hooks and
the commands): standard library only, and nothing else of torchrig."""
