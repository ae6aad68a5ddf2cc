"""Checkpoint save/load time against raw sequential I/O of the same bytes on the same disk.

    python -m benchmarks.checkpoint_io [--dir DIR] [--mb 100] [--repeats 5] [--device cpu]

Save and load of a `TrainingState` by `CheckpointManager` against the same bytes written and
read raw, reads cold where the OS allows (docs/checkpoints.md, "Speed"; docs/benchmarks.md,
"Checkpoints"). --device cuda includes the copies between GPU and host memory. Prints one JSON
document: each case's median and best seconds, and the ratios to raw I/O.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torchrig.checkpoint import CheckpointManager, TrainingState, torchfile
from torchrig.checkpoint.directory import write_synced
from torchrig.checkpoint.single_file import SingleFileLayout

CHUNK = 8 << 20


def make_state(megabytes: int, device: str = "cpu") -> TrainingState:
    """An MLP of fp32 1024x1024 layers (4 MiB each) summing to ~`megabytes`, with an optimizer
    that holds no tensors of its own: the file is the model's bytes plus a little framing."""
    layer_bytes = 1024 * 1024 * 4 + 1024 * 4
    layers = max(1, round(megabytes * 1_000_000 / layer_bytes))
    torch.manual_seed(0)
    with torch.no_grad():
        model = torch.nn.Sequential(*(torch.nn.Linear(1024, 1024) for _ in range(layers)))
        for parameter in model.parameters():
            parameter.normal_()
    model.to(device)
    return TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))


def drop_from_cache(path: Path) -> bool:
    """Evict a file's pages so the next read comes from the disk. False where unsupported."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # dirty pages cannot be dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def raw_write(path: Path, tensors: list[torch.Tensor]) -> None:
    with open(path, "wb") as f:
        for tensor in tensors:
            view = memoryview(tensor.numpy()).cast("B")
            for start in range(0, len(view), CHUNK):
                f.write(view[start : start + CHUNK])
        f.flush()
        os.fsync(f.fileno())


def raw_read_into_new_memory(path: Path) -> torch.Tensor:
    """Sequential read into freshly allocated memory of the file's size, as any loader must
    (the page faults of 100 MB of new memory are a visible part of a load)."""
    size = path.stat().st_size
    out = torch.empty(size, dtype=torch.uint8)
    view = memoryview(out.numpy()).cast("B")
    done = 0
    with open(path, "rb", buffering=0) as f:
        while done < size and (n := f.readinto(view[done : done + CHUNK])):
            done += n
    return out


def staged_save(path: Path, state: TrainingState, step: int) -> None:
    payload = SingleFileLayout().payload(state, step)
    write_synced(path, lambda f: torchfile.save(payload, f, checksums=False, stage=every_tensor))


def every_tensor(_tensor: torch.Tensor) -> bool:
    return True


def run(directory: Path, megabytes: int, repeats: int, device: str = "cpu") -> dict[str, object]:
    state = make_state(megabytes, device)
    # The raw figures write and read host memory: the disk's speed, whatever holds the model.
    tensors = [t.detach().cpu() for t in state.model.state_dict().values()]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    raw_path = directory / "raw.bin"
    manager = CheckpointManager(directory / "ckpt", keep=1, layout="file")
    checked = CheckpointManager(directory / "ckpt-crc", keep=1, layout="file", checksums=True)
    step = iter(range(1_000_000))

    def load(checkpoints: CheckpointManager) -> None:
        checkpoints.load_latest(state)
        if device.startswith("cuda"):
            torch.cuda.synchronize()  # the copy into GPU memory is part of the load

    results: dict[str, list[float]] = {}

    def time_each(cases: dict[str, tuple[Callable[[], object], Path | None]]) -> None:
        """Each case once per repeat, interleaved so that disk and neighbour noise hits all
        alike; a case with a path is read cold (that file dropped from the cache first)."""
        for _ in range(repeats):
            for name, (fn, cold_file) in cases.items():
                if cold_file:
                    drop_from_cache(cold_file)
                start = time.perf_counter()
                fn()
                results.setdefault(name, []).append(time.perf_counter() - start)

    # Untimed: a run's first save pins its host staging memory; every later one reuses it.
    manager.save(next(step), state)
    saves: dict[str, tuple[Callable[[], object], Path | None]] = {
        "raw write + fsync": (lambda: raw_write(raw_path, tensors), None),
        "CheckpointManager.save": (lambda: manager.save(next(step), state), None),
        "save (checksums=True)": (lambda: checked.save(next(step), state), None),
    }
    if device == "cpu":
        # What a model on a GPU goes through (a copy to host memory beside the write), here on
        # CPU tensors: the cost of the mechanism, with no device copy to hide.
        staged = directory / "staged.pt"
        saves["save, staged like a GPU's"] = (lambda: staged_save(staged, state, next(step)), None)
    time_each(saves)
    ckpt_path = manager.list()[-1].path
    crc_path = checked.list()[-1].path
    cold = drop_from_cache(raw_path)
    time_each(
        {
            "raw read into new memory": (lambda: raw_read_into_new_memory(raw_path), raw_path),
            "CheckpointManager.load_latest": (lambda: load(manager), ckpt_path),
            "load_latest (checksums=True file)": (lambda: load(checked), crc_path),
        }
    )
    medians = {name: statistics.median(times) for name, times in results.items()}
    mins = {name: min(times) for name, times in results.items()}
    return {
        "tensor_bytes": nbytes,
        "file_bytes": ckpt_path.stat().st_size,
        "repeats": repeats,
        "device": device,
        "cold_reads": cold,
        "median_s": medians,
        "min_s": mins,
        "save_vs_raw_best": mins["raw write + fsync"] / mins["CheckpointManager.save"],
        "load_vs_raw_best": mins["raw read into new memory"]
        / mins["CheckpointManager.load_latest"],
        "save_vs_raw": medians["raw write + fsync"] / medians["CheckpointManager.save"],
        "save_crc_vs_raw": medians["raw write + fsync"] / medians["save (checksums=True)"],
        "load_vs_raw": medians["raw read into new memory"]
        / medians["CheckpointManager.load_latest"],
        "load_crc_vs_raw": medians["raw read into new memory"]
        / medians["load_latest (checksums=True file)"],
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("."), help="disk to test (default: .)")
    parser.add_argument("--mb", type=int, default=100, help="model size in MB (default: 100)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--device", default="cpu", choices=["cpu", "cuda"], help="where the model lives"
    )
    args = parser.parse_args(argv)
    if not args.dir.is_dir():
        print(f"checkpoint_io: {args.dir}: no such directory", file=sys.stderr)
        return 1
    if args.mb < 1:
        print(f"checkpoint_io: --mb {args.mb}: give a size of at least 1 MB", file=sys.stderr)
        return 1
    if args.device == "cuda" and not torch.cuda.is_available():
        print("checkpoint_io: --device cuda: CUDA is not available here", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix=".ckpt-bench-", dir=args.dir))
    try:
        report = run(work, args.mb, max(1, args.repeats), args.device)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
