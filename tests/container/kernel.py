"""Run a cell in a kernel of the stack's JupyterLab, as a notebook does: the REST API starts the
kernel (its kernelspec, as JupyterLab's Launcher would), the kernel's websocket carries the
execute request and brings back what the cell printed."""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from dataclasses import dataclass

from .stack import Stack

CELL_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Cell:
    output: str  # stdout and stderr streams, as the notebook shows them
    error: str  # "ename: evalue" when the cell raised, else ""


def api(stack: Stack, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"{stack.jupyter_url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"token {stack.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        text = reply.read().decode()
    return json.loads(text) if text else {}


def execute_request(code: str, session: str) -> dict:
    return {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "msg_type": "execute_request",
            "session": session,
            "username": "test",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
        "channel": "shell",
        "buffers": [],
    }


async def run_cells(stack: Stack, kernel_id: str, cells: list[str], timeout_s: float) -> list[Cell]:
    from tornado.websocket import websocket_connect

    url = (
        f"ws://127.0.0.1:{stack.jupyter_port}/api/kernels/{kernel_id}/channels?token={stack.token}"
    )
    connection = await websocket_connect(url)
    session = uuid.uuid4().hex
    results = []
    try:
        for code in cells:
            request = execute_request(code, session)
            await connection.write_message(json.dumps(request))
            results.append(await asyncio.wait_for(collect(connection, request), timeout_s))
    finally:
        connection.close()
    return results


async def collect(connection: object, request: dict) -> Cell:
    """The cell's streams and error, until its kernel says idle."""
    output, error = [], ""
    while True:
        raw = await connection.read_message()  # type: ignore[attr-defined]
        if raw is None:
            raise ConnectionError("the kernel's websocket closed")
        message = json.loads(raw)
        if message.get("parent_header", {}).get("msg_id") != request["header"]["msg_id"]:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            output.append(content["text"])
        elif kind == "error":
            error = f"{content['ename']}: {content['evalue']}"
        elif kind == "status" and content["execution_state"] == "idle":
            return Cell("".join(output), error)


def run_in_a_kernel(stack: Stack, *cells: str, timeout_s: float = CELL_TIMEOUT_S) -> list[Cell]:
    """Start a "Python 3" kernel, run the cells in it in order, shut it down."""
    kernel = api(stack, "POST", "/api/kernels", {"name": "python3"})
    try:
        return asyncio.run(run_cells(stack, kernel["id"], list(cells), timeout_s))
    finally:
        api(stack, "DELETE", f"/api/kernels/{kernel['id']}")
