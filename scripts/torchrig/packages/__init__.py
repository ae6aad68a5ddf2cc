"""`torchrig packages` and the kept venv's pip and uv wrappers; the kept venv and the pinned stack
themselves are in `shared/` (docs/packages.md)."""
