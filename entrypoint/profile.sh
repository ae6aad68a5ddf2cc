# shellcheck shell=sh
# Login shells (ssh, `bash -l`, tmux) start from /etc/profile, which resets PATH on
# Debian/Ubuntu. dev's own shells restore the container's environment the entrypoint saved at
# start. Root's shells source nothing from there: the file is in dev's state dir, and no check
# of a path dev controls makes sourcing it safe (dev can swap a symlink between the check and the
# `.`, or point it at a root-owned /proc file whose text dev chose), so root's login PATH stays
# the system's own. Other users' shells source it only when it is theirs (-O).
if [ "$(id -u)" != 0 ] && [ -O /run/torchrig/environment.sh ] && [ -r /run/torchrig/environment.sh ]; then
    # shellcheck source=/dev/null
    . /run/torchrig/environment.sh
fi
