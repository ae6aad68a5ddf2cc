"""The Makefile's helpers, run on the user's machine with plain `python3` and no venv: standard
library and the shared top-level modules only, never `torchrig.image` (docs/architecture.md)."""
