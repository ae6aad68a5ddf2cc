"""The network facts of a multi-node launch, read from this machine's real sockets."""

from __future__ import annotations

import socket

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
    sock = network.listen(0)
    yield sock
    sock.close()


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


def test_a_taken_port_cannot_be_listened_on(listener: socket.socket) -> None:
    with pytest.raises(OSError) as raised:
        network.listen(listener.getsockname()[1])
    assert raised.value.strerror == "Address already in use"
