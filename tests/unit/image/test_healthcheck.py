from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchrig.image import healthcheck
from torchrig.image.state import SERVICES_FILE
from torchrig.shared.ownership import FileNotRead

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:08AE 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1
   1: 0100007F:22B8 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000  1000        0 2 1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue
   0: 00000000000000000000000000000000:22B8 00000000000000000000000000000000:0000 0A 00000000:0
"""


def test_listening_ports_only_counts_listen_state() -> None:
    assert healthcheck.listening_ports(TCP) == {2222}
    assert healthcheck.listening_ports(TCP6) == {8888}


def test_sshd_probe_reads_socket_tables_without_connecting(tmp_path: Path) -> None:
    tcp, tcp6 = tmp_path / "tcp", tmp_path / "tcp6"
    tcp.write_text(TCP)
    tcp6.write_text(TCP6)
    assert healthcheck.sshd_answers(2222, (tcp, tcp6)) is None
    assert healthcheck.sshd_answers(2223, (tcp, tcp6)) == "nothing listens on port 2223"
    assert healthcheck.sshd_answers(2222, (tmp_path / "absent",)) is not None


def test_only_the_services_that_run_are_probed(tmp_path: Path) -> None:
    assert healthcheck.running_services(tmp_path) == []
    (tmp_path / SERVICES_FILE).write_text("jupyter sshd bogus")
    assert healthcheck.running_services(tmp_path) == ["jupyter", "sshd"]


def test_jupyter_probe_reports_a_closed_port() -> None:
    assert healthcheck.jupyter_answers("127.0.0.1", port=1) is not None


class FakeJupyter(http.server.BaseHTTPRequestHandler):
    """Answers /api with 200, and 403 to foreign Hosts only when its Host check is on."""

    host_check = True

    def do_GET(self) -> None:
        host = self.headers.get("Host", "")
        allowed = host.startswith("127.0.0.1")
        self.send_response(200 if allowed or not self.host_check else 403)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_jupyter() -> Iterator[tuple[int, type[FakeJupyter]]]:
    class Handler(FakeJupyter):
        pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], Handler
    server.shutdown()
    server.server_close()


def test_jupyter_with_its_host_check_is_healthy(
    fake_jupyter: tuple[int, type[FakeJupyter]],
) -> None:
    port, _ = fake_jupyter
    assert healthcheck.jupyter_answers("127.0.0.1", port) is None
    # Listening on every interface (compose's own network) is listening on loopback too.
    assert healthcheck.jupyter_answers("0.0.0.0", port) is None
    # Listening on another address alone, loopback does not answer: that address is asked.
    assert healthcheck.jupyter_answers("127.0.0.2", port) is not None


def test_a_redirect_from_dev_s_jupyter_is_not_followed() -> None:
    """The healthcheck runs as root and dev runs Jupyter: a redirect would have root fetch a
    URL dev chose. The redirect's own status is the answer."""
    fetched: list[str] = []

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api"
        assert healthcheck.http_status(url) == 302
        assert fetched == ["/api"]
    finally:
        server.shutdown()
        server.server_close()


def test_jupyter_that_answers_a_foreign_host_is_unhealthy(
    fake_jupyter: tuple[int, type[FakeJupyter]],
) -> None:
    port, handler = fake_jupyter
    handler.host_check = False  # the extension did not load
    assert healthcheck.jupyter_answers("127.0.0.1", port) == (
        "it answers a request for Host 'rebinding-check.invalid' with 200 instead of 403: its Host "
        "check (torchrig.jupyter.hosts) is off, so a DNS-rebinding web page could reach it"
    )


def test_a_services_file_symlinked_to_roots_file_is_not_followed(tmp_path: Path) -> None:
    # dev owns the state dir; the healthcheck runs as root.
    roots = tmp_path / "roots-only"
    roots.write_text("jupyter sshd")
    roots.chmod(0o600)
    state = tmp_path / "state"
    state.mkdir()
    (state / SERVICES_FILE).symlink_to(roots)
    with pytest.raises(FileNotRead, match="a symlink, not followed"):
        healthcheck.running_services(state)


def test_a_state_dir_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / SERVICES_FILE).write_text("jupyter")
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileNotRead, match="a symlink, not followed"):
        healthcheck.running_services(tmp_path / "state")


def test_a_huge_services_file_is_not_read(tmp_path: Path) -> None:
    with (tmp_path / SERVICES_FILE).open("wb") as handle:
        handle.truncate(10 * 2**30)  # 10 GiB, sparse: reading it would take the healthcheck's time
    with pytest.raises(FileNotRead, match="longer than a services list"):
        healthcheck.running_services(tmp_path)


def test_a_fifo_in_place_of_the_services_file_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / SERVICES_FILE)
    with pytest.raises(FileNotRead, match="not a regular file"):
        healthcheck.running_services(tmp_path)


def test_main_reports_a_bad_services_file_as_unhealthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / SERVICES_FILE).symlink_to("/etc/shadow")
    monkeypatch.setattr(healthcheck, "readable_state_dir", lambda: tmp_path)
    assert healthcheck.main() == 1
    assert capsys.readouterr().out == (
        f"unhealthy: the services list: {tmp_path / SERVICES_FILE}: a symlink, not followed\n"
    )
