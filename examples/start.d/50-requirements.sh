#!/bin/bash
# An example start hook: copy it to /workspace/start.d/ to run it. Every executable file there
# runs as dev, in name order, at each start of the workstation, before JupyterLab and sshd. Its
# output shows in `make logs` under its name; a hook that fails (or outlasts START_HOOK_TIMEOUT)
# is named there and the services start anyway. `chmod -x` a hook to keep it without running it (the log says it is skipped).
#
# This one installs the workspace's requirements.txt, if there is one, into your kept packages
# (they live on the `packages` volume and survive `make down`/`make up` and rebuilds). Once
# everything is installed, a start costs pip's check, a second or two. The image's stack
# (torch, torchvision, triton, nvidia-*) stays as it is: a requirement that would replace it is
# refused, and this hook then fails with pip's message (docs/packages.md says how to override).
set -euo pipefail

requirements=/workspace/requirements.txt
if [ ! -f "$requirements" ]; then
    echo "no $requirements: nothing to install"
    exit 0
fi
# --no-input: nothing can answer a prompt here; --disable-pip-version-check: no notice per start.
pip install --no-input --disable-pip-version-check -r "$requirements"
