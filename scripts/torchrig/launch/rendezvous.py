"""A multi-node launch by hand (`torchrig launch --nnodes 2 --rdzv-endpoint a:29400 ...` on each
node): the endpoint checked before torchrun starts, so a mistake is one clear line, not a hung
rendezvous; and the warning for a machine whose job ports are open to the internet.

The endpoint must resolve and, from another node, answer or at least refuse (a refusal means the
endpoint's own launch has not started yet; torchrun waits for it), not drop packets. With
`--hostfile`, torchrig.multihost.preflight checks every host instead.
"""

from __future__ import annotations

from torchrig.facts import network
from torchrig.facts.network import Reach, Route
from torchrig.launch.plan import LaunchError
from torchrig.launch.torchrun import TorchrunFlags
from torchrig.multihost.preflight import exposure_warning, unreachable_message


def check_rendezvous(flags: TorchrunFlags, timeout_s: float = 5.0) -> Route | None:
    """This node's route to the endpoint; None without an endpoint.

    Errors before torchrun starts for what torchrun would only report after its 60 s timeout: a
    name that does not resolve, an endpoint that drops connections.
    """
    endpoint = flags.rdzv_endpoint
    if endpoint is None:
        return None
    route = network.route_to(endpoint.host)
    if route is None:
        raise LaunchError(
            f"--rdzv-endpoint {endpoint}: {endpoint.host!r} does not resolve on this machine: "
            "give its address, or add it to DNS or /etc/hosts"
        )
    if not is_local(endpoint.host, route):
        outcome, detail = network.reach(endpoint, timeout_s)
        if outcome == Reach.UNREACHABLE:
            raise LaunchError(unreachable_message(endpoint, detail))
    return route


def is_local(host: str, route: Route) -> bool:
    """The endpoint is this machine: its address is the route's own source address."""
    return route.loopback or network.resolve(host) == route.address


def exposure_here(flags: TorchrunFlags) -> str | None:
    """The warning for this machine, when it has a public address; else None."""
    public = network.public_addresses()
    if not public:
        return None
    ports = "the rendezvous store on a free port, the workers' store on another"
    if flags.rdzv_endpoint is not None:
        ports = (
            f"the rendezvous store on port {flags.rdzv_endpoint.port} of its host, the workers' "
            "store on a free port"
        )
    return exposure_warning("this machine", public, ports)
