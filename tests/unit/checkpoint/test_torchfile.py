"""One torch.save file: the cheap structure check, the CRC check, weights_only loading."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointError, torchfile


def written(path: Path, checksums: bool) -> Path:
    with path.open("wb") as f:
        torchfile.save({"step": 1, "w": torch.ones(64, 64)}, f, checksums=checksums)
    return path


def test_flipped_bytes_fail_the_crc_check(tmp_path: Path) -> None:
    path = written(tmp_path / "f.pt", checksums=True)
    torchfile.load(path)
    data = path.read_bytes()
    middle = len(data) // 2
    path.write_bytes(
        data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 8]) + data[middle + 8 :]
    )
    with pytest.raises(CheckpointError, match="corrupt"):
        torchfile.load(path)
    # torch.load alone does not notice: the CRCs are the only defence against this.
    assert torch.load(path, weights_only=True)["step"] == 1


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty file"),
        (b"hello", "truncated or not a torch.save file"),
        (None, "a zip file, but not one written by torch.save"),
    ],
)
def test_structure_check_names_what_is_wrong(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "x.pt"
    if content is None:
        import zipfile

        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("readme.txt", "a zip, but no pickle")
    else:
        path.write_bytes(content)
    with pytest.raises(CheckpointError, match=f"x.pt: {message}"):
        torchfile.load(path)
    with pytest.raises(CheckpointError, match="cannot read"):
        torchfile.check_structure(tmp_path / "absent.pt")


def test_save_sets_the_crc_switch_for_one_save_only() -> None:
    before = torch.serialization.get_crc32_options()
    torchfile.save({"x": torch.zeros(2)}, io.BytesIO(), checksums=not before)
    assert torch.serialization.get_crc32_options() == before
