"""What `make up` prints for each service, from inside the container."""

from __future__ import annotations

from torchrig.container import endpoints

BOTH = ("jupyter", "sshd")


def test_running_services_get_their_host_address() -> None:
    lines = endpoints.endpoint_lines(BOTH, ["jupyter", "sshd"], "tok", "0.0.0.0:9999", "[::]:22")
    assert lines == [
        "Jupyter: http://127.0.0.1:9999/lab?token=tok",
        "SSH:     ssh -p 22 dev@127.0.0.1",
    ]


def test_sshd_without_a_key_and_services_left_out_say_so() -> None:
    no_key = endpoints.endpoint_lines(BOTH, ["jupyter"], "t", "127.0.0.1:8888", "127.0.0.1:2222")
    assert no_key[1].startswith("SSH:     not started: no SSH public key (set SSH_PUBLIC_KEY")
    only_ssh = endpoints.endpoint_lines(("sshd",), ["sshd"], "", "a:1", "10.0.0.5:2222")
    assert only_ssh == ["Jupyter: off (not in SERVICES)", "SSH:     ssh -p 2222 dev@10.0.0.5"]
