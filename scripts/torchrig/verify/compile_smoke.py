"""The torch.compile smoke test, in a process of its own, prints one JSON line. Inductor needs the
system's C compiler; slim images fail only at the first compiled call (pytorch#116696)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


def fused(x: Any) -> Any:
    # Small, but enough that Inductor must generate and compile code for it.
    return (x.sin() * 2 + x.cos()).relu().sum(dim=-1)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="compile_smoke")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    begin = time.perf_counter()
    result: dict[str, object] = {"device": args.device}
    try:
        import torch

        inputs = torch.randn(32, 64, device=args.device)
        compiled = torch.compile(fused)
        eager = fused(inputs)
        # Relative: generated kernels may use other (equally valid) sin/cos approximations.
        error = float((compiled(inputs) - eager).abs().max() / eager.abs().max().clamp_min(1e-6))
        result.update(ok=error <= 1e-4, max_error=error)
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        result.update(ok=False, error=f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300])
        result["detail"] = "\n".join(lines[:20])
    result["seconds"] = time.perf_counter() - begin
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
