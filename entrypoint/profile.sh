# shellcheck shell=sh
# Login shells (ssh, `bash -l`, tmux) start from /etc/profile, which resets PATH on
# Debian/Ubuntu. Restore the container's environment that the entrypoint saved at start.
if [ -r /run/torchrig/environment.sh ]; then
    # shellcheck source=/dev/null
    . /run/torchrig/environment.sh
fi
