"""The network facts of a multi-node launch, read from this machine's real sockets."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from torchrig.launch import network
from torchrig.launch.network import Endpoint, Reach


@pytest.mark.parametrize(
    ("text", "endpoint"),
    [("head:29500", Endpoint("head", 29500)), ("head", Endpoint("head", 29400)),
     ("10.0.0.1:1", Endpoint("10.0.0.1", 1)), ("[fd00::1]:29401", Endpoint("fd00::1", 29401)),
     ("[fd00::1]", Endpoint("fd00::1", 29400))],
)  # fmt: skip
def test_endpoints(text: str, endpoint: Endpoint) -> None:
    assert network.parse_endpoint(text) == endpoint


def test_an_endpoint_prints_as_torchrun_reads_it() -> None:
    assert str(Endpoint("head", 29400)) == "head:29400"
    assert str(Endpoint("fd00::1", 29400)) == "[fd00::1]:29400"


@pytest.mark.parametrize("text", ["head:port", "head:0", "head:70000", ":29400", "[fd00::1]:x"])
def test_bad_endpoints_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected HOST:PORT|port must be a number"):
        network.parse_endpoint(text)


def test_the_route_to_this_machine_is_loopback() -> None:
    route = network.route_to("127.0.0.1")
    assert route is not None and route.loopback
    assert route.interface == network.interface_addresses()["127.0.0.1"]
    assert network.route_to("no-such-host.invalid") is None


@pytest.fixture
def listener():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def test_reach_tells_open_refused_unresolved_and_unreachable(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert network.reach(Endpoint("127.0.0.1", port))[0] == Reach.OPEN
    listener.close()
    assert network.reach(Endpoint("127.0.0.1", port)) == (
        Reach.REFUSED, "127.0.0.1: connection refused",
    )  # fmt: skip
    assert network.reach(Endpoint("no-such-host.invalid", 1))[0] == Reach.UNRESOLVED


def test_a_port_that_drops_connections_is_unreachable() -> None:
    """As behind a firewall that drops packets: a listener whose backlog is full, so the kernel
    ignores further connection requests and they time out."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):  # fills the backlog
            outcome, detail = network.reach(Endpoint("127.0.0.1", port), timeout_s=0.3)
    assert (outcome, detail) == (Reach.UNREACHABLE, "127.0.0.1: no answer within 0.3 s")


IF_INET6 = """\
00000000000000000000000000000001 01 80 10 80       lo
fe800000000000000042e4fffe602754 05 40 20 80  docker0
20010db8000000000000000000000005 02 40 00 80     eth0
2a0104f8000000000000000000000002 02 40 00 80     eth0
fd000000000000000000000000000002 02 40 00 80     eth0
"""


def test_every_address_of_the_machine_is_listed_with_its_interface(tmp_path: Path) -> None:
    table = tmp_path / "if_inet6"
    table.write_text(IF_INET6)
    found = network.all_addresses(table)
    assert found["127.0.0.1"] == "lo"  # IPv4, from the interfaces themselves
    assert {found["::1"], found["2a01:4f8::2"], found["fd00::2"]} == {"lo", "eth0"}
    assert network.all_addresses(tmp_path / "no-ipv6")["127.0.0.1"] == "lo"


def test_only_globally_routable_addresses_are_public() -> None:
    addresses = {
        "127.0.0.1": "lo", "10.1.2.3": "eth0", "172.17.0.1": "docker0", "192.168.1.5": "wlan0",
        "100.64.0.7": "tailscale0", "169.254.1.1": "eth1", "192.0.2.7": "doc",
        "203.0.113.0": "doc", "8.8.4.4": "eth2", "fe80::1": "eth0", "fd00::2": "eth0",
        "2001:db8::5": "doc", "2a01:4f8::2": "eth0",
    }  # fmt: skip
    assert network.public_addresses(addresses) == [("2a01:4f8::2", "eth0"), ("8.8.4.4", "eth2")]


def test_the_messages_name_the_port_to_open_and_every_public_address() -> None:
    unreachable = network.unreachable_message(Endpoint("head", 29555), "no answer within 5 s")
    assert unreachable.startswith(
        "cannot reach the rendezvous endpoint head:29555 (no answer within 5 s): a firewall "
        "dropping TCP port 29555?"
    )
    public = [("203.0.114.9", "eth0"), ("2001:db8::1", "eth1")]
    warning = network.exposure_warning("b", public, "the store on port 29555")
    assert warning.startswith(
        "b has public address(es) 203.0.114.9 (eth0), 2001:db8::1 (eth1), and the job listens "
        "there too: torch's stores listen on every interface (the store on port 29555)"
    )
