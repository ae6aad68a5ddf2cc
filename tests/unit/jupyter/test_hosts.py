"""The Host-header (DNS-rebinding) check: which Hosts pass, and a real tornado app refusing the rest
before any of its handlers runs."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from torchrig.jupyter.hosts import host_allowed, host_of, install
from tornado.httpclient import AsyncHTTPClient, HTTPClientError
from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler

NAMES = ("localhost", "gpubox.lan")


@pytest.mark.parametrize(
    "header",
    [
        "127.0.0.1:8888",  # Docker's published loopback port, as the browser writes it
        "localhost:8888",
        "LocalHost.",  # names are case-insensitive; a trailing dot is the same name
        "192.168.1.20:8888",  # BIND_ADDR opened to the network: the workstation's address
        "[::1]:8888",
        "[fe80::1]",
        "gpubox.lan:8888",  # a name the user listed (JUPYTER_HOSTNAMES)
        "10.0.0.5",
    ],
)
def test_addresses_and_listed_names_pass(header: str) -> None:
    assert host_allowed(header, NAMES)


@pytest.mark.parametrize(
    "header",
    [
        "evil.example:8888",  # a rebinding page's own name
        "127.0.0.1.evil.example",
        "localhost.evil.example:8888",
        "gpubox:8888",  # not listed: only gpubox.lan is
        "",
        "::1",  # IPv6 without brackets is not a valid Host
        "a:b:c",
        "[not-an-address]:8888",
    ],
)
def test_other_names_and_malformed_headers_are_refused(header: str) -> None:
    assert not host_allowed(header, NAMES)


def test_the_host_part_drops_the_port_and_brackets() -> None:
    assert host_of("Example.ORG:443") == "example.org"
    assert host_of("[::1]:8888") == "::1"
    assert host_of("a b") == "a b"  # kept, and refused as a name nobody listed
    assert host_of(":8888") is None


class Hello(RequestHandler):
    def get(self) -> None:
        self.write("hello")

    def post(self) -> None:
        self.write("posted")


async def fetch(
    port: int, host: str, method: str = "GET", path: str = "/api/thing"
) -> tuple[int, str]:
    client = AsyncHTTPClient()
    body = b"" if method == "POST" else None
    try:
        reply = await client.fetch(
            f"http://127.0.0.1:{port}{path}", method=method, body=body, headers={"Host": host}
        )
    except HTTPClientError as error:
        assert error.response is not None
        return error.code, error.response.body.decode()
    return reply.code, reply.body.decode()


def serve(requests: list[tuple[str, str, str]]) -> list[tuple[int, str]]:
    """Each (Host, method, path) sent to a real tornado app with the check installed (allowed:
    localhost), its `{port}` filled in; `/later` is added after the check, as extensions do."""

    async def scenario() -> list[tuple[int, str]]:
        app = Application([(r"/api/thing", Hello), (r"/api", Hello)])
        install(app, ["localhost"], logging.getLogger("test.jupyter"))
        app.add_handlers(".*$", [(r"/later", Hello)])  # still behind the check
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = HTTPServer(app)
        server.listen(port, "127.0.0.1")
        try:
            return [
                await fetch(port, host.format(port=port), method, path)
                for host, method, path in requests
            ]
        finally:
            server.stop()

    return asyncio.run(scenario())


def test_a_real_app_refuses_a_foreign_host_before_its_handlers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="test.jupyter"):
        results = serve(
            [
                ("127.0.0.1:{port}", "GET", "/api/thing"),
                ("localhost:{port}", "POST", "/api/thing"),
                ("[::1]:{port}", "GET", "/later"),
                ("evil.example:{port}", "GET", "/api/thing"),
                ("evil.example:{port}", "POST", "/api/thing"),
                ("evil.example:{port}", "GET", "/later"),
            ]
        )
    assert results[:3] == [(200, "hello"), (200, "posted"), (200, "hello")]
    for code, body in results[3:]:
        assert code == 403
        assert "refused Host 'evil.example:" in body and "JUPYTER_HOSTNAMES" in body
    assert "refused Host 'evil.example:" in caplog.text


def test_a_probe_under_invalid_is_refused_without_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The healthcheck's request (every few seconds) against a page's: both refused, only the
    # page's logged, in the refusal's warning and in the access log.
    with caplog.at_level(logging.INFO):
        (probe_code, _), (page_code, _) = serve(
            [("rebinding-check.invalid", "GET", "/api"), ("evil.example:{port}", "GET", "/api")]
        )
    assert probe_code == page_code == 403
    assert "invalid" not in caplog.text
    refusals = [r for r in caplog.records if r.name == "test.jupyter"]
    assert ["evil.example" in r.getMessage() for r in refusals] == [True]
    access = [r for r in caplog.records if r.name == "tornado.access"]
    assert len(access) == 1 and "403 GET /api" in access[0].getMessage()
