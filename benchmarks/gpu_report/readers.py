"""Reading what the report's child commands wrote: pytest's JUnit XML, `torchrig verify --json`,
the training example's log lines. Pure functions of text, so each is tested on samples.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import Any

# The example's throughput line (rank 0): "step     12 | loss 1.3862 | lr 0.0125 | ..."
LOSS_LINE = re.compile(r"^step\s+(\d+) \| loss (\S+) \|", re.MULTILINE)
RESUMED_LINE = re.compile(r"resuming from step (\d+)")


# --- pytest --junitxml --------------------------------------------------------------------


def parse_junit(text: str) -> dict[str, Any]:
    """Counts and the names of failures; skip reasons without repeats."""
    root = ET.fromstring(text)
    cases = root.findall(".//testcase")
    failures, skip_reasons = [], []
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for case in cases:
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        if case.find("failure") is not None:
            counts["failed"] += 1
            failures.append(name)
        elif case.find("error") is not None:
            counts["errors"] += 1
            failures.append(name)
        elif (skipped := case.find("skipped")) is not None:
            counts["skipped"] += 1
            skip_reasons.append(skipped.get("message") or "no reason given")
        else:
            counts["passed"] += 1
    return {
        "tests": len(cases),
        **counts,
        "failures": failures,
        "skip_reasons": list(dict.fromkeys(skip_reasons)),
    }


# --- torchrig verify --json ---------------------------------------------------------------


def verify_run(document: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The few things the report keeps of one verify run."""
    return {
        "seconds": round(seconds, 2),
        "elapsed_s": document.get("elapsed_s"),
        "exit_code": document.get("exit_code"),
        "summary": document.get("summary"),
        "failed_checks": [
            f"{check['section']}/{check['name']}: {check['summary']}"
            for check in document.get("checks", [])
            if check.get("verdict") == "FAIL"
        ],
        "warned_checks": [
            f"{check['section']}/{check['name']}: {check['summary']}"
            for check in document.get("checks", [])
            if check.get("verdict") == "WARN"
        ],
    }


def verify_figures(document: dict[str, Any]) -> dict[str, Any]:
    """Per-GPU matmul and memory figures, the all-reduce sweep and the compile check."""
    matmul, memory = {}, {}
    allreduce = compile_check = None
    for check in document.get("checks", []):
        section, name, data = check["section"], check["name"], check.get("data") or {}
        if section == "probes" and name.endswith(" matmul") and "tflops" in data:
            matmul[name.removesuffix(" matmul")] = data
        elif section == "probes" and name.endswith(" memory") and "gbps" in data:
            memory[name.removesuffix(" memory")] = data
        elif section == "collectives" and name == "all-reduce":
            allreduce = {key: data.get(key) for key in ("backend", "world", "sweep")}
            allreduce["verdict"] = check["verdict"]
        elif section == "probes" and name == "torch.compile":
            compile_check = {"verdict": check["verdict"], "summary": check["summary"]}
    return {"matmul": matmul, "memory": memory, "allreduce": allreduce, "compile": compile_check}


# --- the training example's output --------------------------------------------------------


def losses(output: str) -> dict[int, float]:
    """Step -> mean loss, from the example's throughput lines (rank 0 prints them)."""
    return {int(step): float(loss) for step, loss in LOSS_LINE.findall(output)}


def resumed_from(output: str) -> int | None:
    found = RESUMED_LINE.search(output)
    return int(found.group(1)) if found else None


def stitched_curve(killed: dict[int, float], resumed: dict[int, float], start: int) -> dict:
    """A killed run's losses up to the checkpoint it resumed from, the resumed run's after it."""
    curve = {step: loss for step, loss in killed.items() if step <= start}
    curve.update({step: loss for step, loss in resumed.items() if step > start})
    return dict(sorted(curve.items()))


def curve_difference(reference: dict[int, float], other: dict[int, float]) -> dict[str, Any]:
    """Largest absolute and relative difference over the steps both curves have."""
    steps = sorted(set(reference) & set(other))
    worst_abs = worst_rel = 0.0
    for step in steps:
        a, b = reference[step], other[step]
        if a == b or (math.isnan(a) and math.isnan(b)):
            continue
        difference = abs(a - b)
        if not math.isfinite(difference):  # one of them diverged
            worst_abs = worst_rel = math.inf
            continue
        worst_abs = max(worst_abs, difference)
        worst_rel = max(worst_rel, difference / max(abs(a), 1e-12))
    return {
        "loss_steps_compared": len(steps),
        "max_loss_abs_diff": worst_abs,
        "max_loss_rel_diff": worst_rel,
        "loss_curve": [[step, reference[step], other[step]] for step in steps],
    }
