#!/bin/bash
# Container entrypoint, run by tini (PID 1) as root. All start-up logic (checks banner, user
# remap, SSH, Jupyter, supervision) lives in Python with unit tests; this only hands over to it,
# by absolute paths: the image's PATH starts with the venv, not the system's own tools
# (scripts/torchrig/image/root_main.py says how root runs Python).
set -euo pipefail
exec /usr/bin/python3 -I -S /usr/lib/torchrig entrypoint "$@"
