"""What a real `torchrig launch` loads: the launcher costs little more than torchrun itself
(docs/benchmarks.md, "The launcher"). A real torchrun starts a real rank."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.unit.test_layers import ACROSS_HOSTS


def test_a_launch_loads_neither_torch_nor_the_other_commands(tmp_path) -> None:
    """A real `torchrig launch` with its process count given imports no torch (torchrun, its
    child, does), no module of another command, nor the SSH launcher: it costs little more than
    torchrun itself (docs/benchmarks.md, "The launcher")."""
    script = tmp_path / "hello.py"
    script.write_text("print('hello from the rank')\n")
    probe = (
        "import sys; from torchrig.cli import main; "
        f"code = main(['launch', '--nproc-per-node', '1', {str(script)!r}]); "
        "print('loaded:', *sorted(sys.modules)); sys.exit(code)"
    )
    environ = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environ, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "hello from the rank" in result.stdout
    loaded = set(result.stdout.split("loaded:")[-1].split())
    others = ("torchrig.verify", "torchrig.status", "torchrig.checkpoint.cli", "torchrig.packages")
    assert sorted(name for name in loaded if name.startswith(others)) == []
    assert {"torch", "pynvml"} & loaded == set()
    across_hosts = {f"torchrig.launch.{name}" for name in ACROSS_HOSTS}
    assert sorted(across_hosts & loaded) == ["torchrig.launch.hostfile"]
