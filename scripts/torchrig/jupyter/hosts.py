"""Jupyter server extension: the Host-header (DNS-rebinding) check, kept on inside the container.

jupyter_server checks the Host header only while it listens on loopback; in a container it listens
on 0.0.0.0, which turns the check off, and turned back on it would refuse the workstation's own
address. So this check allows what a DNS-rebinding page cannot forge, an IP address (a browser
sends one only when the user typed it), plus `ServerApp.local_hostnames` (JUPYTER_HOSTNAMES adds
to it); every other request gets 403 before any handler runs (the API, kernels, proxied servers)."""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Collection
from typing import Any

from tornado.httputil import HTTPServerRequest
from tornado.routing import Matcher, Rule
from tornado.web import Application, RequestHandler

# "name", "name:8888", "10.0.0.5:8888", "[::1]:8888": the host part, without the port.
HOST_HEADER = re.compile(r"^(?P<host>\[[0-9a-fA-F:.%\w]+\]|[^:\[\]]*)(?::\d+)?$")
# Names under .invalid never resolve (RFC 6761) and a browser cannot set Host itself, so no
# browser ever sends one: such a request is a probe of the check (the container's healthcheck,
# every few seconds), refused like any other but left out of the log.
PROBE_DOMAIN = ".invalid"


def host_of(host_header: str) -> str | None:
    """The host part of a Host header, lower case, without brackets or a trailing dot; None when
    the header is malformed."""
    match = HOST_HEADER.match(host_header.strip())
    if match is None or not match.group("host"):
        return None
    host = match.group("host").lower()
    if host.startswith("["):
        return host[1:-1]
    return host.rstrip(".")


def host_allowed(host_header: str, names: Collection[str]) -> bool:
    """Whether a request with this Host header may reach Jupyter (see the module docstring)."""
    host = host_of(host_header)
    if host is None:
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host in {name.lower().rstrip(".") for name in names}
    return True


def is_probe(host_header: str) -> bool:
    """A Host no browser sends: a name under PROBE_DOMAIN."""
    host = host_of(host_header)
    return host is not None and host.endswith(PROBE_DOMAIN)


class ForeignHost(Matcher):
    """Matches the requests whose Host is neither an address nor one of `names`."""

    def __init__(self, names: Collection[str]) -> None:
        self.names = tuple(names)

    def match(self, request: HTTPServerRequest) -> dict[str, Any] | None:
        return None if host_allowed(request.host, self.names) else {}


class RefuseForeignHost(RequestHandler):
    """403 for every method, with the fix in the body and in Jupyter's log."""

    def initialize(self, log: logging.Logger) -> None:
        self.log = log

    def prepare(self) -> None:
        message = (
            f"refused Host {self.request.host!r}: neither an IP address nor an allowed name (a "
            "check against DNS-rebinding web pages). If you browse to Jupyter by that name, add "
            "it to JUPYTER_HOSTNAMES and restart the container."
        )
        if not is_probe(self.request.host):
            self.log.warning(message)
        self.set_status(403)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(message + "\n")


def install(web_app: Application, names: Collection[str], log: logging.Logger) -> None:
    """Put the check in front of every route of `web_app` (the first rule of its router)."""
    router = web_app.default_router
    rule = Rule(ForeignHost(names), RefuseForeignHost, {"log": log})
    router.rules.insert(0, router.process_rule(rule))
    leave_probes_out_of_the_access_log(web_app)


def leave_probes_out_of_the_access_log(web_app: Application) -> None:
    """Every request is logged by the application's `log_request` (tornado's hook for it): a
    refused probe is not."""
    write = web_app.log_request

    def log_request(handler: RequestHandler) -> None:
        if not (handler.get_status() == 403 and is_probe(handler.request.host)):
            write(handler)

    web_app.log_request = log_request  # type: ignore[method-assign]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    install(serverapp.web_app, serverapp.local_hostnames, serverapp.log)
    serverapp.log.info(
        "Host check on: Jupyter answers to IP addresses and to %s",
        ", ".join(serverapp.local_hostnames) or "no names",
    )
