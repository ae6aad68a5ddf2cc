#!/usr/bin/env bash
# Container entrypoint, run by tini (PID 1). All start-up logic (checks banner, user remap, SSH,
# Jupyter, supervision) lives in Python with unit tests; this only hands over to it.
set -euo pipefail
exec /opt/venv/bin/python -m torchrig.container.entrypoint "$@"
