"""Time to read a sharded checkpoint's `.metadata`: torch's C unpickler against torchrig's
restricted one (safe_dcp.MetadataUnpickler, pure Python, so that it can refuse BUILD on classes).

    python benchmarks/dcp_metadata.py [--tensors 10000] [--repeats 5] [--json]

The metadata of a real `torch.distributed.checkpoint` save of `--tensors` small tensors (its size
grows with their number, not their bytes); both read the same bytes, medians of `--repeats`.
"""

from __future__ import annotations

import argparse
import io
import json
import pickle
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torchrig.checkpoint.safe_dcp import MetadataUnpickler


def metadata_bytes(tensors: int, folder: Path) -> bytes:
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(tensors // 2)])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        dcp.save({"model": model.state_dict()}, checkpoint_id=folder, no_dist=True)
    return (folder / ".metadata").read_bytes()


def median_seconds(read: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        raw = metadata_bytes(args.tensors, Path(folder))
    result = {
        "tensors": args.tensors,
        "metadata_bytes": len(raw),
        "c_unpickler_s": median_seconds(lambda: pickle.loads(raw), args.repeats),
        "torchrig_s": median_seconds(
            lambda: MetadataUnpickler(io.BytesIO(raw)).load(), args.repeats
        ),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['tensors']} tensors, {result['metadata_bytes'] / 1e6:.1f} MB of metadata: "
        f"C unpickler {result['c_unpickler_s']:.3f} s, torchrig's {result['torchrig_s']:.3f} s"
    )


if __name__ == "__main__":
    main()
