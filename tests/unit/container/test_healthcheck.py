from __future__ import annotations

from pathlib import Path

from torchrig.container import healthcheck
from torchrig.container.state import SERVICES_FILE

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
    assert healthcheck.jupyter_answers(port=1) is not None
