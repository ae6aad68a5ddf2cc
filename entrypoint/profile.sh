# shellcheck shell=sh
# Login shells (ssh, `bash -l`, tmux) start from /etc/profile, which resets PATH on
# Debian/Ubuntu. Restore the container's environment that the entrypoint saved at start. The file
# is dev's (dev wrote it), so only its owner sources it (-O): never root, whose login PATH stays
# the system's own.
if [ -O /run/torchrig/environment.sh ] && [ -r /run/torchrig/environment.sh ]; then
    # shellcheck source=/dev/null
    . /run/torchrig/environment.sh
fi
