"""The Jupyter notebook, executed for real: it launches a short DDP run and plots its logs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from testbed import EXAMPLE

NOTEBOOK = EXAMPLE.with_suffix(".ipynb")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_notebook_runs_a_ddp_job_and_plots_its_tensorboard_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel inherits this environment: checkpoints go to a temp folder, one thread per rank.
    monkeypatch.setenv("TORCHRIG_NOTEBOOK_CHECKPOINTS", str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=480,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()

    outputs = "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "stream"
    )
    assert "+ " in outputs and "torch.distributed.run" in outputs  # the command it ran
    assert "finished 60 steps" in outputs  # the streamed log of the run
    assert "train/loss" in outputs and "train/samples_per_s" in outputs
    images = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]
    assert images, "the plot cell showed no figure"
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "curves.png").stat().st_size > 1000
    assert (run_dir / "latest").is_file()
