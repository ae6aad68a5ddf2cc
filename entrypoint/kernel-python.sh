#!/bin/sh
# The Python of Jupyter's "Python 3" kernel (the image's kernelspec names this file, root-owned,
# as /opt/venv/bin/torchrig-kernel-python). For dev: the kept packages' venv, so that `%pip
# install` in a notebook lands there, kept across restarts, whichever Jupyter started the kernel
# (JupyterLab, `jupyter execute`, nbclient). For root, or with no kept venv: the image's Python.
set -eu
kept=/opt/packages/venv/bin/python
if [ "$(/usr/bin/id -u)" != 0 ] && [ -x "$kept" ]; then
    exec "$kept" "$@"
fi
exec /opt/venv/bin/python "$@"
