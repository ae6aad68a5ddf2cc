"""The walk of one torchrig command through the package's modules, by reading its calls as it runs.

    python benchmarks/walk.py [--json] MODULE [ARGS...]

runs `python -m MODULE ARGS...` in this process (`torchrig` for the console script,
`torchrig.host.up` for `make up`'s helper) and follows every call of a torchrig function to
another one:
- rooms: the modules it runs code in;
- stays: the functions it runs;
- moves: the calls from a function in one room to a function in another (each pair once);
- climbs back: the moves into a room the walk has been in before: the reader goes back to a
  room already read (an orchestrator returning to a helper room, or a lower room calling up);
- calls up: the moves into a room that is waiting further down the same call stack (B called A,
  directly or not, and A calls back into B): a path that goes back up.
Calls made inside other programs (torchrun, the container) are not followed: this process only.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
from pathlib import Path
from types import FrameType
from typing import Any

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


class Walk:
    def __init__(self, package: Path) -> None:
        self.package = str(package) + "/"
        self.rooms: list[str] = []
        self.stays: set[str] = set()
        self.seen: set[tuple[str, str]] = set()
        self.moves: list[tuple[str, str]] = []
        self.climbs: list[tuple[str, str]] = []
        self.calls_up: list[tuple[str, str]] = []

    def room(self, frame: FrameType) -> str | None:
        path = frame.f_code.co_filename
        if not path.startswith(self.package):
            return None
        return path[len(self.package) :].removesuffix(".py").removesuffix("/__init__")

    def rooms_on_stack(self, frame: FrameType | None) -> list[str]:
        """The rooms of the torchrig frames below `frame`, innermost first."""
        found = []
        while frame is not None:
            room = self.room(frame)
            if room is not None:
                found.append(room)
            frame = frame.f_back
        return found

    def on_call(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        room = self.room(frame)
        if room is None or importing(frame):
            return
        stay = f"{room}:{frame.f_code.co_qualname}"
        caller = self.caller(frame.f_back)
        if caller is not None and caller[0] != room and (caller[1], stay) not in self.seen:
            self.seen.add((caller[1], stay))
            self.moves.append((caller[0], room))
            if room in self.rooms:
                self.climbs.append((caller[0], room))
            if room in self.rooms_on_stack(frame.f_back):
                self.calls_up.append((caller[0], room))
        if room not in self.rooms:
            self.rooms.append(room)
        self.stays.add(stay)

    def caller(self, frame: FrameType | None) -> tuple[str, str] | None:
        """The room and function of the nearest torchrig frame below, if any."""
        while frame is not None:
            room = self.room(frame)
            if room is not None:
                return room, f"{room}:{frame.f_code.co_qualname}"
            frame = frame.f_back
        return None

    def summary(self) -> dict[str, Any]:
        return {
            "rooms": len(self.rooms),
            "stays": len(self.stays),
            "moves": len(self.moves),
            "climbs_back": len(self.climbs),
            "calls_up": len(self.calls_up),
            "room_order": self.rooms,
            "climbs": [f"{a} -> {b}" for a, b in self.climbs],
            "up": [f"{a} -> {b}" for a, b in self.calls_up],
        }


def importing(frame: FrameType | None) -> bool:
    """Code run while a module is imported (its top level, class bodies, decorators): not the
    command's walk, which starts when the import is done."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def walk(module: str, args: list[str]) -> dict[str, Any]:
    import torchrig

    tracer = Walk(Path(torchrig.__file__).resolve().parent)
    sys.argv = [module, *args]
    sys.setprofile(tracer.on_call)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    return tracer.summary()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("module")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    stdout = sys.stdout
    result = walk(options.module, options.args)
    if options.json:
        print(json.dumps(result), file=stdout)
        return
    print(
        f"{result['rooms']} rooms, {result['stays']} stays, {result['moves']} moves, "
        f"{result['climbs_back']} climbs back, {result['calls_up']} calls up",
        file=stdout,
    )
    print("rooms in order: " + ", ".join(result["room_order"]), file=stdout)
    for climb in result["climbs"]:
        print(f"climbs back: {climb}", file=stdout)
    for call in result["up"]:
        print(f"calls up: {call}", file=stdout)


if __name__ == "__main__":
    main()
