"""The MCP servers the chat may use, read from `mcp.json` in the format Claude Desktop and LM Studio use:

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                  "env": {"DEBUG": "1"}},
        "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ..."}}}}

A server with "command" is started as a process and spoken to over its stdin/stdout; one with "url" is a
streamable-HTTP endpoint. `"disabled": true` keeps a server listed without starting it.

Reading never raises: a file that is not JSON or not this shape gives one message for the whole file, and each
server that is wrong gives a message naming the server and the field, while the others are still used. No Qt here.
"""
import json
import os
from dataclasses import dataclass, field

FILE_NAME = "mcp.json"


@dataclass
class ServerConfig:
    name: str
    command: str | None = None           # stdio: the program and its arguments
    args: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    url: str | None = None               # streamable HTTP: the endpoint and the headers sent with each request
    headers: dict = field(default_factory=dict)
    disabled: bool = False

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"


@dataclass
class Config:
    servers: list                        # ServerConfig, in the file's order
    errors: list                         # sentences for the user, one per problem


def default_path() -> str:
    """`mcp.json` in the app's data folder."""
    from app.paths import data_dir
    return os.path.join(data_dir(), FILE_NAME)


def load(path: str) -> Config:
    """The servers of the file at `path` (none when the file does not exist) and what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return Config([], [])
    except (OSError, UnicodeDecodeError) as e:
        return Config([], [f"{path}: cannot be read ({e})"])
    return parse(text, path)


def parse(text: str, where: str = FILE_NAME) -> Config:
    """The servers described by `text` (the file's content; `where` names it in the messages)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        return Config([], [f"{where}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"])
    servers = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(servers, dict):
        return Config([], [f'{where}: expected an object with "mcpServers", holding the servers by name '
                           '(as Claude Desktop and LM Studio write it)'])
    out, errors = [], []
    for name, entry in servers.items():
        try:
            out.append(_server(name, entry))
        except ValueError as e:
            errors.append(f'{where}: server "{name}": {e}')
    return Config(out, errors)


def _server(name: str, entry) -> ServerConfig:
    if not isinstance(entry, dict):
        raise ValueError('expected an object with "command" (a program to start) or "url"')
    command, url = entry.get("command"), entry.get("url")
    if command is None and url is None:
        raise ValueError('needs "command" (a program to start, with "args") or "url" (a streamable HTTP endpoint)')
    if command is not None and url is not None:
        raise ValueError('has both "command" and "url": keep one')
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise ValueError('"disabled" must be true or false')
    if command is not None:
        if not isinstance(command, str) or not command.strip():
            raise ValueError('"command" must be a non-empty string (the program to start)')
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError('"args" must be a list of strings')
        return ServerConfig(name, command=command, args=list(args), env=_strings(entry, "env"), disabled=disabled)
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f'"url" must be an http:// or https:// address, not {url!r}')
    return ServerConfig(name, url=url, headers=_strings(entry, "headers"), disabled=disabled)


def _strings(entry: dict, key: str) -> dict:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f'"{key}" must be an object of strings (name: value)')
    return dict(value)
