"""GPUs per person (`GPUS`): checked, and another running workstation's refused unless
`SHARE_GPUS=1` (docs/sharing.md). What others hold is read from the engine."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from torchrig.host.workstations import ALL, GpuClaim, Workstation
from torchrig.shared.voice import CannotGoOn

VARIABLE = "GPUS"
SHARE_VARIABLE = "SHARE_GPUS"
INDEX = re.compile(r"^\d+$")
UUID = re.compile(r"^(GPU|MIG)-[0-9a-fA-F-]+$")
HOW = (
    f"  {VARIABLE}=all, host indices `{VARIABLE}=0,1` (nvidia-smi's numbers), or UUIDs "
    f"`{VARIABLE}=GPU-...` (`nvidia-smi -L`); `make ls` shows who holds which."
)


def parse_request(value: str | None) -> GpuClaim:
    """What GPUS asks for: every GPU, or these ids."""
    text = (value or ALL).strip()
    if text == ALL:
        return GpuClaim(every=True)
    ids = tuple(part.strip() for part in text.split(","))
    bad = [part for part in ids if not (INDEX.match(part) or UUID.match(part))]
    if bad or not ids:
        raise CannotGoOn(
            f"{VARIABLE}={text}: {', '.join(map(repr, bad)) or 'nothing'} is neither a GPU's "
            "host index nor its UUID.",
            HOW,
        )
    if len(set(ids)) != len(ids):
        raise CannotGoOn(f"{VARIABLE}={text} names a GPU twice.", HOW)
    return GpuClaim(ids=ids)


@dataclass(frozen=True)
class HostGpu:
    index: str
    uuid: str


def parse_host_table(csv: str) -> list[HostGpu]:
    """`nvidia-smi --query-gpu=index,uuid --format=csv,noheader`: '0, GPU-...' lines."""
    rows = [line.split(",") for line in csv.splitlines() if line.strip()]
    return [HostGpu(index.strip(), uuid.strip()) for index, uuid, *_ in rows]


def read_host_table() -> list[HostGpu] | None:
    """This machine's GPUs, or None without nvidia-smi (or when it fails)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    command = [smi, "--query-gpu=index,uuid", "--format=csv,noheader"]
    asked = subprocess.run(command, capture_output=True, text=True, check=False)
    return parse_host_table(asked.stdout) if asked.returncode == 0 else None


def held(claim: GpuClaim, table: list[HostGpu] | None) -> set[str] | None:
    """The host indices a claim holds (UUIDs as given where the table cannot say); None: all."""
    if claim.every:
        return None
    by_uuid = {gpu.uuid.lower(): gpu.index for gpu in table or []}
    return {by_uuid.get(one.lower(), one) for one in claim.ids}


def holders(others: list[Workstation]) -> list[Workstation]:
    return [other for other in others if other.running and other.gpus.any]


def check_known(request: GpuClaim, table: list[HostGpu] | None) -> None:
    """Ids this machine does not have are an error (when its table can be read)."""
    if table is None or not request.ids:
        return
    known = {gpu.index for gpu in table} | {gpu.uuid.lower() for gpu in table}
    unknown = [one for one in request.ids if one.lower() not in known]
    if unknown:
        have = ", ".join(f"{gpu.index} ({gpu.uuid})" for gpu in table) or "none"
        raise CannotGoOn(
            f"{VARIABLE}={','.join(request.ids)}: this machine has no GPU "
            f"{', '.join(unknown)}. It has: {have}.",
            HOW,
        )


def overlaps(
    request: GpuClaim, others: list[Workstation], table: list[HostGpu] | None
) -> list[tuple[Workstation, str]]:
    """Each other running workstation that holds a GPU asked for, with which."""
    wanted = held(request, table)
    found = []
    for other in holders(others):
        theirs = held(other.gpus, table)  # None (every one) stands for all
        common = theirs if wanted is None else wanted if theirs is None else wanted & theirs
        if common is None:
            found.append((other, ALL))
        elif common:
            found.append((other, ",".join(sorted(common, key=lambda i: (len(i), i)))))
    return found


def check(
    value: str | None, share: bool, others: list[Workstation], table: list[HostGpu] | None
) -> None:
    """CannotGoOn for GPUS malformed, unknown here, or held by another running workstation."""
    request = parse_request(value)
    check_known(request, table)
    found = [] if share else overlaps(request, others, table)
    if not found:
        return
    held_by = [
        f"GPU {gpus} {'are' if ',' in gpus or gpus == 'all' else 'is'} held by workstation "
        f"{other.project} from {other.folder or '(no folder)'} (PUID {other.puid}, GPUS "
        f"{other.gpus.text()})"
        for other, gpus in found
    ]
    raise CannotGoOn(
        "the GPUs asked for are in use by another running workstation: "
        + "; ".join(held_by)
        + ". Nothing was started.",
        f"  Name others ({VARIABLE}=0,1; `make ls` shows who holds which), or share on purpose "
        f"with {SHARE_VARIABLE}=1.",
    )
