"""The MCP sessions (app/tools/client.py, no Qt): the fixture server of tests/mcp_server_fixture.py reached over stdio
and over streamable HTTP through the mcp SDK, its tools listed and called; a server that cannot start says why; close
ends the sessions' thread and the server processes."""
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("mcp")

from app.tools.client import ToolHub  # noqa: E402
from app.tools.config import ServerConfig  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_server_fixture.py")
TOOLS = ["add", "lookup", "slow", "crash"]


def started(servers: list) -> ToolHub:
    hub = ToolHub(servers)
    hub.start()
    deadline = time.monotonic() + 30
    while any(s.state == "starting" for s in hub.statuses.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return hub


def call(hub, server, tool, args, timeout=10.0):
    done = threading.Event()
    out = []
    hub.call(server, tool, args, lambda r: (out.append(r), done.set()), timeout)
    assert done.wait(timeout + 5), "the call never ended"
    return out[0]


def test_a_stdio_server_is_started_listed_called_and_stopped():
    hub = started([ServerConfig("calc", command=sys.executable, args=[FIXTURE]),
                   ServerConfig("off", command="python", disabled=True)])
    try:
        assert [(n, s.state) for n, s in hub.statuses.items()] == [("calc", "ready"), ("off", "disabled")]
        assert [t.name for t in hub.tools()] == TOOLS
        assert hub.tools()[1].openai() == {"type": "function", "function": {
            "name": "lookup", "description": "The word kept under a key.", "parameters": {
                "properties": {"key": {"enum": ["fruit", "colour"], "title": "Key", "type": "string"}},
                "required": ["key"], "title": "lookupArguments", "type": "object"}}}
        result = call(hub, "calc", "add", {"a": 40, "b": 2})
        assert (result.text, result.is_error) == ("40 + 2 = 42", False)
        result = call(hub, "calc", "lookup", {"key": "nut"})
        assert result.is_error                                   # the tool refused the argument: said, not raised
        assert result.text.startswith("Error executing tool lookup: 1 validation error for lookupArguments\nkey\n"
                                      "  Input should be 'fruit' or 'colour'")
        result = call(hub, "off", "add", {})
        assert (result.text, result.is_error) == ('the tool "add" cannot run: its server "off" is not running', True)
    finally:
        assert hub.close()
    assert not hub._thread.is_alive()


def test_a_program_that_does_not_exist_says_so():
    hub = started([ServerConfig("ghost", command="petit-no-such-program", args=["--x"])])
    try:
        status = hub.statuses["ghost"]
        assert status.state == "failed" and hub.tools() == []
        assert status.error == ('server "ghost" (petit-no-such-program --x) could not start: FileNotFoundError: '
                                "[Errno 2] No such file or directory: 'petit-no-such-program'")
    finally:
        assert hub.close()


@pytest.fixture
def http_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, FIXTURE, "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)


def test_a_streamable_http_server_is_listed_and_called(http_server):
    hub = started([ServerConfig("remote", url=http_server, headers={"X-Test": "1"})])
    try:
        assert hub.statuses["remote"].state == "ready", hub.statuses["remote"].error
        assert [t.name for t in hub.tools()] == TOOLS
        result = call(hub, "remote", "lookup", {"key": "colour"})
        assert (result.text, result.is_error) == ("the colour is teal", False)
    finally:
        assert hub.close()


def test_an_http_server_that_is_not_there_says_so():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hub = started([ServerConfig("gone", url=f"http://127.0.0.1:{port}/mcp")])
    try:
        status = hub.statuses["gone"]
        assert status.state == "failed"
        assert status.error == (f'server "gone" (http://127.0.0.1:{port}/mcp) could not start: ConnectError: All '
                                'connection attempts failed')
    finally:
        assert hub.close()
