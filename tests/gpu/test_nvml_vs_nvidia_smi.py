"""NVML's facts and torchrig verify's verdicts on them, against nvidia-smi on the same card
(marker `gpu`). The GPU report (`make gpu-report`) shows this test's outcome and what it compared.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable

import pytest
from torchrig.facts import nvml

from . import nvidia_smi

pytestmark = pytest.mark.gpu

# Clock event reasons can change between two readings a moment apart: agree within three tries.
ATTEMPTS = 3


def test_nvml_verdicts_match_nvidia_smi(record_property: Callable[[str, object], None]) -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no nvidia-smi on PATH")
    for _attempt in range(ATTEMPTS):
        xml = subprocess.run(
            ["nvidia-smi", "-q", "-x"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        snapshot = nvml.read_snapshot()
        assert snapshot.available, snapshot.error
        rows, unpaired = nvidia_smi.compare(snapshot, nvidia_smi.parse_smi_xml(xml))
        if all(row.match for row in rows) and not unpaired:
            break
    record_property("compared", f"{len(rows)} check(s) on {len(snapshot.gpus)} GPU(s)")
    differing = [nvidia_smi.comparison_to_dict(row) for row in rows if not row.match]
    assert rows and not unpaired, f"GPUs only one side lists: {unpaired}"
    assert differing == [], json.dumps(differing, indent=1)
