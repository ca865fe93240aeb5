"""A tiny MCP server for the tests, written with the official SDK's MCPServer (FastMCP before mcp 2) and run over stdio:
`python tests/mcp_server_fixture.py`. Its tools: `add` (two integers), `lookup` (a fixed word for a key), `slow`
(answers after a minute: the call's timeout), `crash` (the process exits mid-call)."""
import os
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
    server.run("stdio")
