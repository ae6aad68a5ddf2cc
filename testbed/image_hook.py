"""The image's `.pth` hook (entrypoint/torchrig-worker-guard.pth) in every interpreter started
outside the image: its line as a `sitecustomize`, which `site` runs at each start as it runs a
`.pth` line. For the tests and benchmarks of users' own code run on this machine."""

from pathlib import Path

from testbed import REPO_ROOT

HOOK = REPO_ROOT / "entrypoint" / "torchrig-worker-guard.pth"


def with_image_hook(environ: dict[str, str], folder: Path) -> dict[str, str]:
    """`environ` with PYTHONPATH on `folder`, where the hook is written as sitecustomize.py."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(HOOK.read_text())
    return {**environ, "PYTHONPATH": str(folder)}
