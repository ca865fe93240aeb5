"""A tiny MCP server for the tests, written with the official SDK's MCPServer (FastMCP before mcp 2), run over stdio
(`python tests/mcp_server_fixture.py`) or streamable HTTP (`... --http PORT`: http://127.0.0.1:PORT/mcp). Its tools: `add` (two integers), `lookup` (a fixed word for a key), `slow`
(answers after a minute: the call's timeout), `crash` (the process exits mid-call)."""
import os
import sys
import time
from typing import Literal

from mcp.server.mcpserver import MCPServer

WORDS = {"fruit": "plum", "colour": "teal"}

server = MCPServer("petit-test")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return f"{a} + {b} = {a + b}"


@server.tool()
def lookup(key: Literal["fruit", "colour"]) -> str:
    """The word kept under a key."""
    return f"the {key} is {WORDS[key]}"


@server.tool()
def slow() -> str:
    """Answers after a minute."""
    time.sleep(60)
    return "late"


@server.tool()
def crash() -> str:
    """The server exits without answering."""
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
