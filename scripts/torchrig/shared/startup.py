"""How the container tells `make up` how its start goes: one protocol, its words and exit codes
defined here for both sides (host/up.py asks, image/endpoints.py answers). Standard library only.

While the container runs, the host asks, as root, with `docker exec`:

    ASK --wait SECONDS --jupyter ADDRESS --ssh ADDRESS    (the addresses compose published)

and the answer is lines on stdout and an exit code:
- `status: <what the start does now>`, each time that changes, while it waits;
- READY: one line per service, how to reach it (the URL, the ssh command);
- WAITED_OUT: `not ready: <why>`, the time ran out (the container still runs);
- NOT_THE_STARTS: `not ready: <what>`, its state folder holds what the start did not write.

A start that fails in root's steps records its error (START_ERROR: root's, where dev cannot
write) and exits: the container stops, and the exec with it. The host then reads the record from
the stopped container (`docker cp` reads a stopped container's files). A container that stopped
without one crashed, or failed in dev's steps: what those say is dev's (its processes could say
anything), so the host says only the exit code, and `make logs` has the rest.
"""

from __future__ import annotations

from enum import IntEnum

# The command that answers (torchrig.image.root_main's `endpoints`), run as root: it may run
# before the start has remapped dev's uid, and root reads dev's state by its own rules.
ASK_AS = "root"
ASK = ("/usr/bin/python3", "-I", "-S", "/usr/lib/torchrig", "endpoints")

STATUS = "status: "
NOT_READY = "not ready: "


class Answer(IntEnum):
    """The exit code of ASK --wait."""

    READY = 0
    WAITED_OUT = 3
    NOT_THE_STARTS = 4


# The start's state folder under Docker (torchrig.image.state), dev's; and the record of why
# root's steps of the start failed, root's alone (dev cannot write /run): a few lines, the first
# said after `[torchrig] error:` as the start said them.
STATE_DIR = "/run/torchrig"
START_ERROR = "/run/torchrig-start-error"
MAX_START_ERROR_BYTES = 8192
