"""The app's MCP sessions, through the official `mcp` SDK: one thread runs an asyncio loop that holds a session per
server of mcp.json (a process spoken to over stdin/stdout, or a streamable-HTTP endpoint), lists its tools and
calls them. No Qt here: `on_change` and a call's `done` are called on that thread (app/tools/service.py turns them
into Qt signals).

Every failure becomes a sentence naming the server: a program that cannot start or exits (with the last lines it
wrote to stderr), a server that does not answer within START_TIMEOUT, a call that takes longer than its timeout or
whose server went away. `close()` ends every session (a process is asked to exit, then killed, by the SDK) and joins
the thread.
"""
import asyncio

import anyio
import tempfile
import threading
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from app.tools.config import ServerConfig

START_TIMEOUT = 30.0           # seconds a server has to start and list its tools
CALL_TIMEOUT = 60.0            # seconds a tool call may take, unless the caller says otherwise
CONNECT_TIMEOUT = 30.0         # an HTTP server's connection; its streams may stay silent HTTP_READ_TIMEOUT
HTTP_READ_TIMEOUT = 300.0


@dataclass
class ToolInfo:
    server: str
    name: str
    description: str
    schema: dict                 # the JSON schema of its arguments

    def openai(self) -> dict:
        """The tool as a chat template and an OpenAI-compatible server take it."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.schema or {"type": "object", "properties": {}}}}


@dataclass
class ServerStatus:
    state: str = "starting"      # "starting", "ready", "failed", "disabled", "stopped"
    tools: list = field(default_factory=list)
    error: str = ""


@dataclass
class ToolResult:
    text: str
    is_error: bool = False       # the tool reported an error, or the call failed (the text says why)


def result_text(result) -> str:
    """The text of an MCP CallToolResult: its text parts joined; other parts named by their type."""
    parts = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'content')}]")
    return "\n".join(parts)


def _leaf(e: BaseException) -> BaseException:
    """The first real exception inside anyio's exception groups."""
    while getattr(e, "exceptions", None):       # an exception group (a builtin from Python 3.11)
        e = e.exceptions[0]
    return e


def _said(e: BaseException) -> str:
    e = _leaf(e)
    if isinstance(e, TimeoutError):
        return "it did not answer in time"
    text = str(e).strip()
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class ToolHub:
    """The sessions of `servers` (ServerConfig); `statuses` says how each is, `tools()` lists the tools of those
    ready, `call()` runs one."""

    def __init__(self, servers: list, on_change=None):
        self.servers = list(servers)
        self.on_change = on_change or (lambda: None)
        self.statuses = {s.name: ServerStatus("disabled" if s.disabled else "starting") for s in self.servers}
        self._sessions: dict = {}
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()          # bound to the loop on first use (Python 3.10+)
        self._tasks: list = []
        self._thread = threading.Thread(target=self._run, name="petit-mcp", daemon=True)

    # the loop's thread
    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._tasks = [asyncio.create_task(self._serve(s)) for s in self.servers if not s.disabled]
        await self._stop.wait()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _set(self, name: str, **changes) -> None:
        status = self.statuses[name]
        for key, value in changes.items():
            setattr(status, key, value)
        self.on_change()

    async def _serve(self, server: ServerConfig) -> None:
        """Start the server, list its tools, keep the session until the hub closes."""
        errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") if server.command else None
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(server, stack, errlog)
                with anyio.fail_after(START_TIMEOUT):    # inside the SDK's scopes, which must nest in this task
                    await session.initialize()
                    listed = await session.list_tools()
                tools = [ToolInfo(server.name, t.name, t.description or "", dict(t.input_schema or {}))
                         for t in listed.tools]
                self._sessions[server.name] = session
                self._set(server.name, state="ready", tools=tools, error="")
                await self._stop.wait()
                self._sessions.pop(server.name, None)
            self._set(server.name, state="stopped")
        except BaseException as e:      # noqa: BLE001 - every failure is said, the other servers go on
            self._sessions.pop(server.name, None)
            if self.statuses[server.name].state == "starting":
                self._set(server.name, state="failed", tools=[], error=self._failure(server, e, errlog))
            elif self.statuses[server.name].state == "ready":       # it had started: what ended it
                self._set(server.name, state="failed", tools=[], error=f'server "{server.name}" stopped: {_said(e)}')
            if isinstance(e, asyncio.CancelledError):
                raise
        finally:
            if errlog is not None:
                errlog.close()

    async def _open(self, server: ServerConfig, stack: AsyncExitStack, errlog):
        from mcp import ClientSession
        if server.command:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client
            params = StdioServerParameters(command=server.command, args=server.args, env=server.env or None)
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client
            http = await stack.enter_async_context(httpx2.AsyncClient(
                headers=server.headers, timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=HTTP_READ_TIMEOUT)))
            read, write = await stack.enter_async_context(streamable_http_client(server.url, http_client=http))
        return await stack.enter_async_context(ClientSession(read, write))

    @staticmethod
    def _failure(server: ServerConfig, e: BaseException, errlog) -> str:
        where = f"{server.command} {' '.join(server.args)}".strip() if server.command else server.url
        text = f'server "{server.name}" ({where}) could not start: {_said(e)}'
        if errlog is not None:
            try:
                errlog.seek(0)
                tail = [line.rstrip() for line in errlog.read().splitlines() if line.strip()][-3:]
            except (OSError, ValueError):
                tail = []
            if tail:
                text += "; it said: " + " / ".join(tail)
        return text

    # from any thread
    def tools(self) -> list:
        """The tools of the servers ready, in mcp.json's order."""
        return [t for s in self.servers for t in self.statuses[s.name].tools if self.statuses[s.name].state == "ready"]

    def call(self, server: str, tool: str, arguments: dict, done, timeout: float = CALL_TIMEOUT) -> None:
        """Run `tool` of `server` with `arguments`; done(ToolResult) is called on the hub's thread when it ends."""
        async def run():
            done(await self._call(server, tool, arguments, timeout))
        if self._thread.is_alive() and not self._loop.is_closed():
            asyncio.run_coroutine_threadsafe(run(), self._loop)
        else:
            done(ToolResult(f'the tool "{tool}" cannot run: its server "{server}" is stopped', True))

    async def _call(self, server: str, tool: str, arguments: dict, timeout: float) -> ToolResult:
        session = self._sessions.get(server)
        if session is None:
            status = self.statuses.get(server)
            why = status.error if status is not None and status.error else f'its server "{server}" is not running'
            return ToolResult(f'the tool "{tool}" cannot run: {why}', True)
        try:
            with anyio.fail_after(timeout + 1):
                result = await session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except Exception as e:          # noqa: BLE001 - a failed call is said to the user and the model
            leaf = _leaf(e)
            if isinstance(leaf, TimeoutError) or "timed out" in str(leaf).lower():
                return ToolResult(f'the tool "{tool}" of server "{server}" did not answer within {timeout:g} s', True)
            if "connection closed" in str(leaf).lower():    # the process exited, or the endpoint went away
                self._sessions.pop(server, None)
                self._set(server, state="failed", tools=[], error=f'server "{server}" stopped: its connection closed '
                                                                  f'during a call of "{tool}"')
            return ToolResult(f'the tool "{tool}" of server "{server}" failed: {_said(e)}', True)
        return ToolResult(result_text(result), bool(result.is_error))

    def close(self, timeout: float = 10.0) -> bool:
        """End every session and the thread; True when the thread ended within `timeout` seconds."""
        if not self._thread.is_alive():
            return True
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        return not self._thread.is_alive()

