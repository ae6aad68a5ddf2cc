"""The kept packages: what dev installs (pip, uv, %pip) lives on a volume of its own, in a venv
over the image's read-only one, and the image's stack is pinned so no install replaces it.
`sitedir` (where they are, and the `.pth` hook that puts them in front for every Python but
root's), `kept` (the venv, made and judged at every start), `stack` (the pins), `wrappers` (the
venv's `pip` and `uv`), `cli` (`torchrig packages`). docs/packages.md is the user's side of this.
"""
