"""mcp.json (app/tools/config.py): the servers it lists, and the exact message for each thing that can be wrong
with it. No Qt needed."""
import json

import pytest

from app.tools.config import ServerConfig, load, parse


def test_stdio_and_http_servers_are_read_in_order():
    text = json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-fs", "/tmp"], "env": {"DEBUG": "1"}},
        "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer k"}},
        "off": {"command": "python", "disabled": True}}})
    config = parse(text)
    assert config.errors == []
    assert config.servers == [
        ServerConfig("files", command="npx", args=["-y", "server-fs", "/tmp"], env={"DEBUG": "1"}),
        ServerConfig("search", url="https://example.com/mcp", headers={"Authorization": "Bearer k"}),
        ServerConfig("off", command="python", disabled=True)]
    assert [s.transport for s in config.servers] == ["stdio", "http", "stdio"]


def test_a_missing_file_lists_no_server_and_no_error(tmp_path):
    config = load(str(tmp_path / "mcp.json"))
    assert config.servers == [] and config.errors == []


def test_a_file_that_is_not_json_says_where(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {"a" {"command": "x"}}}')
    config = load(str(path))
    assert config.servers == []
    assert config.errors == [f"{path}: not valid JSON: Expecting ':' delimiter at line 1, column 21"]


@pytest.mark.parametrize("doc", [[], {"servers": {}}, {"mcpServers": []}])
def test_a_file_without_mcp_servers_is_refused(doc):
    assert parse(json.dumps(doc)).errors == [
        'mcp.json: expected an object with "mcpServers", holding the servers by name (as Claude Desktop and LM '
        'Studio write it)']


@pytest.mark.parametrize("entry,message", [
    ({}, 'needs "command" (a program to start, with "args") or "url" (a streamable HTTP endpoint)'),
    ("python", 'expected an object with "command" (a program to start) or "url"'),
    ({"command": ""}, '"command" must be a non-empty string (the program to start)'),
    ({"command": ["python"]}, '"command" must be a non-empty string (the program to start)'),
    ({"command": "python", "args": "server.py"}, '"args" must be a list of strings'),
    ({"command": "python", "args": ["-m", 3]}, '"args" must be a list of strings'),
    ({"command": "python", "env": {"N": 1}}, '"env" must be an object of strings (name: value)'),
    ({"command": "python", "url": "http://x"}, 'has both "command" and "url": keep one'),
    ({"url": "ftp://x"}, "\"url\" must be an http:// or https:// address, not 'ftp://x'"),
    ({"url": "https://x", "headers": ["a"]}, '"headers" must be an object of strings (name: value)'),
    ({"command": "python", "disabled": "yes"}, '"disabled" must be true or false'),
])
def test_a_bad_server_is_named_with_its_field_and_the_others_are_kept(entry, message):
    config = parse(json.dumps({"mcpServers": {"bad": entry, "good": {"command": "python"}}}))
    assert config.errors == [f'mcp.json: server "bad": {message}']
    assert config.servers == [ServerConfig("good", command="python")]
