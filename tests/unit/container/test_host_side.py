"""The helpers `make` runs on the host: .env, bind-mount sources, build checks, lock command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.container import buildcheck, dockerfile_facts, dotenv, host_dirs, lockfile

REPO = Path(__file__).resolve().parents[3]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOVIn3vrfO52GQr5ULEVFwWTv38bAMv/OjVX3L/DwZFJ me@host"


# --- .env ---------------------------------------------------------------------------------------


def test_dotenv_for_a_normal_user_has_ids_and_key() -> None:
    text = dotenv.dotenv_text(1001, 1002, (Path("/home/me/.ssh/id_ed25519.pub"), KEY))
    assert "PUID=1001\nPGID=1002\n" in text
    assert f"SSH_PUBLIC_KEY='{KEY}'\n" in text


def test_dotenv_for_root_leaves_ids_unset_and_says_why() -> None:
    text = dotenv.dotenv_text(0, 0, None)
    assert "PUID=" not in text.replace("# PUID/PGID", "")
    assert "you ran as root" in text
    assert "no ~/.ssh/id_*.pub found" in text


def test_dotenv_prefers_ed25519_and_skips_empty_files(tmp_path: Path) -> None:
    ssh_dir = tmp_path / ".ssh"
    ssh_dir.mkdir()
    (ssh_dir / "id_ed25519.pub").write_text("")
    (ssh_dir / "id_rsa.pub").write_text("ssh-rsa AAAA rsa@host\n")
    assert dotenv.find_public_key(tmp_path) == (ssh_dir / "id_rsa.pub", "ssh-rsa AAAA rsa@host")
    assert dotenv.find_public_key(tmp_path / "nobody") is None


def test_dotenv_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("PUID=4242\n")
    assert dotenv.main(["--path", str(path)]) == 0
    assert path.read_text() == "PUID=4242\n"


def test_dotenv_writes_when_absent(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    assert dotenv.main(["--path", str(path)]) == 0
    assert path.read_text().startswith("# Written by `make up`")


def test_dotenv_refuses_values_it_cannot_quote() -> None:
    with pytest.raises(ValueError):
        dotenv.quote("it's")


# --- bind-mount sources -------------------------------------------------------------------------


def test_missing_bind_sources_are_created_and_volumes_ignored(tmp_path: Path) -> None:
    existing = tmp_path / "workspace"
    existing.mkdir()
    config = {
        "services": {
            "workstation": {
                "volumes": [
                    {"type": "bind", "source": str(existing), "target": "/workspace"},
                    {
                        "type": "bind",
                        "source": str(tmp_path / "ck" / "a"),
                        "target": "/checkpoints",
                    },
                    {"type": "volume", "source": "cache", "target": "/home/dev/.cache"},
                ]
            }
        }
    }
    sources = host_dirs.bind_sources(config)
    assert sources == [existing, tmp_path / "ck" / "a"]
    assert host_dirs.create_missing(sources) == [tmp_path / "ck" / "a"]
    assert (tmp_path / "ck" / "a").is_dir()


# --- build inputs -------------------------------------------------------------------------------

DOCKERFILE = (REPO / "Dockerfile").read_text()


def test_extra_ca_checks(tmp_path: Path) -> None:
    assert buildcheck.check_extra_ca(None) is None
    assert "does not exist" in buildcheck.check_extra_ca(str(tmp_path / "nope.pem"))
    assert "is not a file" in buildcheck.check_extra_ca(str(tmp_path))
    der = tmp_path / "ca.cer"
    der.write_bytes(b"\x30\x82\x01\x0a")
    assert "no PEM certificate" in buildcheck.check_extra_ca(str(der))
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert buildcheck.check_extra_ca(str(pem)) is None


def test_flavour_needs_a_stage_and_a_lock(tmp_path: Path) -> None:
    assert buildcheck.check_flavour(None, DOCKERFILE, REPO / "locks") is None
    assert "is not one of" in buildcheck.check_flavour("cu999", DOCKERFILE, REPO / "locks")
    assert "make lock CUDA_FLAVOUR=cu128" in buildcheck.check_flavour("cu128", DOCKERFILE, tmp_path)


def test_locked_version_reads_the_pin_and_refuses_ambiguity() -> None:
    lock = "numpy==2.1.0 \\\n    --hash=sha256:ab\ntorch==2.13.0+cu128 ; sys_platform == 'linux'\n"
    assert buildcheck.locked_version(lock, "torch") == "2.13.0+cu128"
    assert buildcheck.locked_version(lock, "torchvision") is None
    two = "torch==2.13.0 ; sys_platform == 'linux'\ntorch==2.12.0 ; sys_platform == 'darwin'\n"
    assert buildcheck.locked_version(two, "torch") is None


def test_print_torch_version_gives_the_default_lock_s_torch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("CUDA_FLAVOUR", raising=False)
    monkeypatch.delenv("EXTRA_CA_CERT", raising=False)
    assert buildcheck.main(["--print-torch-version"]) == 0
    lock = (REPO / "locks" / f"{dockerfile_facts.default_flavour(DOCKERFILE)}.txt").read_text()
    (pin,) = [line.split()[0] for line in lock.splitlines() if line.startswith("torch==")]
    assert capsys.readouterr().out == pin.removeprefix("torch==") + "\n"


def test_print_torch_version_fails_with_one_line_for_a_lock_without_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / f"{dockerfile_facts.default_flavour(DOCKERFILE)}.txt").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDA_FLAVOUR", raising=False)
    monkeypatch.delenv("EXTRA_CA_CERT", raising=False)
    assert buildcheck.main(["--print-torch-version"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: locks/") and "pins no single torch version" in err
    assert err.count("\n") == 1


def test_dockerfile_declares_flavours_once_and_a_default_with_a_lock() -> None:
    flavours = dockerfile_facts.flavours(DOCKERFILE)
    assert len(flavours) == len(set(flavours)) >= 2
    default = dockerfile_facts.default_flavour(DOCKERFILE)
    assert default in flavours
    assert (REPO / "locks" / f"{default}.txt").is_file()


def test_every_flavour_uses_a_slim_base_image() -> None:
    for line in DOCKERFILE.splitlines():
        if line.startswith("FROM nvidia/cuda:"):
            assert "-base-ubuntu24.04 AS cuda-cu" in line, line


# --- lock command -------------------------------------------------------------------------------


def test_default_flavour_locks_from_pypi_alone() -> None:
    command = lockfile.uv_command("uv", "cu130", Path("locks/cu130.txt"))
    assert "--index" not in command and "--emit-index-url" not in command
    assert command[command.index("--output-file") + 1] == "locks/cu130.txt"
    assert {"--universal", "--generate-hashes", "--no-config"} <= set(command)
    assert command[command.index("--override") + 1] == "locks/overrides.txt"
    assert command[command.index("--extra") + 1] == "workstation"


def test_other_flavours_add_pytorch_s_index_and_emit_it_into_the_lock() -> None:
    command = lockfile.uv_command("uv", "cu128", Path("locks/cu128.txt"), upgrade=True)
    assert command[command.index("--index") + 1].endswith("/whl/cu128")
    assert "--emit-index-url" in command and "--upgrade" in command


def test_lock_refuses_unknown_flavours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert lockfile.main(["--flavour", "cu999", "--uv", "/bin/true"]) == 2


def test_checked_in_lock_pins_everything_with_hashes_and_not_this_project() -> None:
    lock = (REPO / "locks" / f"{dockerfile_facts.default_flavour(DOCKERFILE)}.txt").read_text()
    requirements = [line for line in lock.splitlines() if line and line[0].isalnum()]
    assert all("==" in line for line in requirements)
    names = {line.split("==")[0] for line in requirements}
    assert {"torch", "torchvision", "jupyterlab", "ipykernel", "paramiko", "pip"} <= names
    assert {"nvidia-ml-py", "tensorboard", "tqdm", "matplotlib"} <= names
    assert "torchrig" not in names
    # locks/overrides.txt: slow to import and optional, so never installed
    (rfc3987,) = [line for line in requirements if line.startswith("rfc3987-syntax==")]
    assert "sys_platform == 'never'" in rfc3987
    assert lock.count("--hash=sha256:") >= len(requirements)


def test_root_owned_workspace_is_handed_to_dev_and_data_left_alone(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "examples").mkdir(parents=True)
    (workspace / "examples" / "train.py").write_text("print()\n")
    data = tmp_path / "data"
    data.mkdir()
    config = {
        "services": {
            "workstation": {
                "environment": {"PUID": "1234", "PGID": "2345"},
                "volumes": [
                    {"type": "bind", "source": str(workspace), "target": "/workspace"},
                    {"type": "bind", "source": str(data), "target": "/data"},
                ],
            }
        }
    }
    assert host_dirs.writable_sources(config) == [workspace]
    assert host_dirs.dev_ids(config) == (1234, 2345)
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    os.chown(workspace / "examples" / "train.py", 0, 0)
    changed = host_dirs.hand_root_owned_to([workspace], 1234, 2345)
    assert changed == 3
    owner = (workspace / "examples" / "train.py").stat()
    assert (owner.st_uid, owner.st_gid) == (1234, 2345)
    assert data.stat().st_uid == 0


def test_dev_ids_default_to_the_image_user_and_reject_garbage() -> None:
    assert host_dirs.dev_ids({"services": {"workstation": {}}}) == (1000, 1000)
    with pytest.raises(SystemExit, match="PUID/PGID must be numbers"):
        host_dirs.dev_ids({"services": {"w": {"environment": {"PUID": "abc"}}}})
