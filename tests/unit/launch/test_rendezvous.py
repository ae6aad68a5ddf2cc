"""A multi-node launch by hand: the endpoint checked before torchrun starts, and the warning for
a machine with a public address."""

from __future__ import annotations

import pytest
from torchrig.facts import network
from torchrig.facts.network import Reach, Route
from torchrig.launch import rendezvous
from torchrig.launch.options import request_from_args
from torchrig.launch.plan import LaunchError
from torchrig.launch.torchrun import TorchrunFlags

from .test_plan import parse


def given(*argv: str) -> TorchrunFlags:
    """torchrun flags as `torchrig launch` reads them (LaunchError for a bad value)."""
    return request_from_args(parse(*argv, "t.py")).torchrun


# --- by hand, on one node -------------------------------------------------------------------


def test_no_endpoint_nothing_to_check() -> None:
    assert rendezvous.check_rendezvous(given("--nnodes", "2")) is None


def test_a_local_endpoint_gives_its_route() -> None:
    route = rendezvous.check_rendezvous(given("--rdzv-endpoint", "127.0.0.1:1"))
    assert route is not None and route.loopback


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [("no-such-host.invalid:29400", "'no-such-host.invalid' does not resolve on this machine"),
     ("head:port", "--rdzv-endpoint 'head:port': the port must be a number")],
)  # fmt: skip
def test_endpoints_that_cannot_work_are_refused(endpoint: str, message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        rendezvous.check_rendezvous(given("--rdzv-endpoint", endpoint))


def test_an_endpoint_that_drops_connections_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(network, "route_to", lambda host: Route("10.0.0.5", "eth0"))
    monkeypatch.setattr(network, "resolve", lambda host: "10.0.0.1")
    monkeypatch.setattr(
        network, "reach", lambda endpoint, timeout: (Reach.UNREACHABLE, "no answer within 5 s")
    )
    with pytest.raises(LaunchError) as raised:
        rendezvous.check_rendezvous(given("--rdzv-endpoint", "head:29400"))
    assert str(raised.value).startswith(
        "cannot reach the rendezvous endpoint head:29400 (no answer within 5 s): a firewall "
        "dropping TCP port 29400? open it"
    )


def test_an_endpoint_that_refuses_is_waited_for_by_torchrun(monkeypatch) -> None:
    monkeypatch.setattr(network, "route_to", lambda host: Route("10.0.0.5", "eth0"))
    monkeypatch.setattr(network, "resolve", lambda host: "10.0.0.1")
    monkeypatch.setattr(network, "reach", lambda endpoint, timeout: (Reach.REFUSED, "refused"))
    assert rendezvous.check_rendezvous(given("--rdzv-endpoint", "head")) == Route(
        "10.0.0.5", "eth0"
    )


def test_this_machine_warns_of_its_public_addresses_for_any_launch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(network, "public_addresses", lambda: [("203.0.114.9", "eth0")])
    by_hand = rendezvous.exposure_here(given("--rdzv-endpoint", "head:29555"))
    assert by_hand is not None
    assert by_hand.startswith("this machine has public address(es) 203.0.114.9 (eth0)")
    assert "the rendezvous store on port 29555 of its host" in by_hand
    alone = rendezvous.exposure_here(
        given()
    )  # --standalone: its store on a free port, all interfaces
    assert alone is not None and "the rendezvous store on a free port" in alone
    monkeypatch.setattr(network, "public_addresses", lambda: [])
    assert rendezvous.exposure_here(given("--rdzv-endpoint", "head:29555")) is None
