"""The network facts a multi-node launch depends on (docs/multinode.md): the route to the endpoint
(torchrun advertises its FQDN otherwise, often 127.0.1.1), whether it answers (a dropping firewall
is otherwise a rendezvous timeout a minute later), public addresses (torch's stores listen on all).
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# torchrun's own default port for the c10d rendezvous.
DEFAULT_RDZV_PORT = 29400
SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address
IF_INET6 = Path("/proc/net/if_inet6")  # Linux: every IPv6 address, one per line


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class Route:
    """The local side of the path to the endpoint."""

    address: str
    interface: str | None  # None when no interface holds the address (unusual)

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.address).is_loopback


class Reach:
    """How a TCP connection to the endpoint went."""

    OPEN = "open"
    REFUSED = "refused"  # the host answered: nothing listens on the port (yet)
    UNREACHABLE = "unreachable"  # timeout, no route: a firewall or the wrong address
    UNRESOLVED = "unresolved"  # the name does not resolve here


def parse_endpoint(text: str) -> Endpoint:
    """'host:port', 'host', '[v6]:port' -> Endpoint; ValueError with the rule otherwise."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        raise ValueError(f"{text!r}: expected HOST:PORT")
    if not port_text:
        return Endpoint(host, DEFAULT_RDZV_PORT)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 1 to 65535")
    return Endpoint(host, int(port_text))


def resolve(host: str) -> str | None:
    """The first IPv4 (else IPv6) address of `host`, or None when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    return str(infos[0][4][0]) if infos else None


def interface_addresses() -> dict[str, str]:
    """IPv4 address -> interface name, for every interface that has one (Linux ioctl)."""
    found: dict[str, str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)
            except OSError:
                continue  # down, or no IPv4 address
            found[socket.inet_ntoa(reply[20:24])] = name
    return found


def all_addresses(if_inet6: Path = IF_INET6) -> dict[str, str]:
    """Every address of this machine's interfaces (IPv4 and IPv6) -> the interface's name."""
    found = interface_addresses()
    try:
        lines = if_inet6.read_text(encoding="ascii").splitlines()
    except OSError:
        lines = []  # no IPv6
    for line in lines:
        fields = line.split()
        if len(fields) >= 6:
            found[str(ipaddress.IPv6Address(bytes.fromhex(fields[0])))] = fields[5]
    return found


def public_addresses(addresses: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(address, interface) for each address of this machine that is globally routable: not
    private, loopback, link-local or shared (carrier-grade NAT)."""
    chosen = all_addresses() if addresses is None else addresses
    return sorted(
        (address, interface)
        for address, interface in chosen.items()
        if ipaddress.ip_address(address).is_global
    )


def route_to(host: str) -> Route | None:
    """The local address and interface that reach `host`; None when it does not resolve."""
    address = resolve(host)
    if address is None:
        return None
    # The address the kernel would send from: a UDP connect sends no packet.
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((address, 9))
        except OSError:
            return None
        local = str(probe.getsockname()[0])
    return Route(local, interface_addresses().get(local))


def reach(endpoint: Endpoint, timeout_s: float = 5.0) -> tuple[str, str]:
    """(Reach.*, detail): one TCP connection attempt to the endpoint."""
    address = resolve(endpoint.host)
    if address is None:
        return Reach.UNRESOLVED, f"{endpoint.host} does not resolve"
    try:
        with socket.create_connection((address, endpoint.port), timeout=timeout_s):
            return Reach.OPEN, address
    except ConnectionRefusedError:  # every ECONNREFUSED
        return Reach.REFUSED, f"{address}: connection refused"
    except TimeoutError:
        return Reach.UNREACHABLE, f"{address}: no answer within {timeout_s:g} s"
    except OSError as exc:
        return Reach.UNREACHABLE, f"{address}: {exc.strerror or exc}"


# --- what these facts mean for a job, in the same words from `launch` (this machine) and from
# the multi-host preflight (every host)


def exposure_warning(
    where: str, public: Sequence[Sequence[str]], ports: str, across_machines: bool = True
) -> str:
    """What a machine with public addresses risks: torch's stores listen on every interface. On
    one machine only the workers' store does (torchrig launch keeps the rest on loopback)."""
    listed = ", ".join(f"{address} ({interface})" for address, interface in public)
    risk = (
        f"torch's stores listen on every interface ({ports}), and gloo and NCCL open ports as "
        "well. Whoever can connect can write rendezvous state, which torch unpickles: their code, "
        "run as this user on every node"
        if across_machines
        else f"the workers' store listens on every interface ({ports}). Whoever can connect can "
        "change the addresses the workers read there, and so stop the job"
    )
    return (
        f"{where} has public address(es) {listed}, and the job listens there too: {risk}. Allow "
        "these ports only from the job's machines (a firewall or security group): "
        "docs/multinode.md, Network exposure"
    )


def unreachable_message(endpoint: Endpoint, detail: str) -> str:
    """An endpoint that `reach` found UNREACHABLE: most often a firewall dropping the port."""
    return (
        f"cannot reach the rendezvous endpoint {endpoint} ({detail}): a firewall dropping "
        f"TCP port {endpoint.port}? open it (and the ports gloo/NCCL use) between the nodes, or "
        "give --rdzv-endpoint an address every node reaches"
    )
