"""The MCP tools as the GUI sees them: reads mcp.json, runs the servers' sessions (a ToolHub on its own thread),
and says in Qt signals, on the GUI thread, when their state changes and when a call ends. It also keeps which tools
the user turned off, and whether a call is asked for before it runs (both kept in the app's state, when given one,
so a restart keeps them)."""
from PySide6.QtCore import QObject, Signal

from app.tools import config as mcp_config
from app.tools.client import CALL_TIMEOUT, ToolHub, ToolResult

ASK_KEY, DISABLED_KEY, PATH_KEY = "tools_ask", "tools_disabled", "tools_config"     # app.db.State keys


class ToolsService(QObject):
    changed = Signal()                       # the servers' state, their tools or the config's errors changed
    call_finished = Signal(str, object)      # the call's id, its ToolResult
    _hub_changed = Signal()                  # from the hub's thread (queued to this object's)
    _hub_done = Signal(str, object)

    def __init__(self, state=None, path: str | None = None, parent=None):
        """state: an app.db.State that keeps the user's choices; path: the mcp.json to read (default: the file the
        user chose, kept in the state, else the one in the app's data folder)."""
        super().__init__(parent)
        self.state = state
        self.path = path or (state.get(PATH_KEY) if state is not None else None) or mcp_config.default_path()
        self.errors: list = []               # the config's problems, as sentences
        self._disabled = set(state.get(DISABLED_KEY, [])) if state is not None else set()
        self._ask = bool(state.get(ASK_KEY, True)) if state is not None else True
        self.timeout = CALL_TIMEOUT
        self.hub: ToolHub | None = None
        self._hub_changed.connect(self.changed)
        self._hub_done.connect(self.call_finished)

    def reload(self) -> None:
        """Read mcp.json again and restart the servers."""
        self.stop()
        self.hub = None
        cfg = mcp_config.load(self.path)
        self.errors = cfg.errors
        if cfg.servers:
            self.hub = ToolHub(cfg.servers, on_change=self._hub_changed.emit)
            self.hub.start()
        self.changed.emit()

    def use_file(self, path: str | None) -> None:
        """Read the servers from the file at `path` from now on (kept across restarts; None: the data folder's
        mcp.json again), and restart them. Another app's file works as it is (Claude Desktop's
        claude_desktop_config.json has the same "mcpServers")."""
        self.path = path or mcp_config.default_path()
        if self.state is not None:
            self.state.set(PATH_KEY, path or None)
        self.reload()

    @property
    def is_default(self) -> bool:
        return self.path == mcp_config.default_path()

    @property
    def ask(self) -> bool:
        """Ask before running a tool (the default)."""
        return self._ask

    @ask.setter
    def ask(self, on: bool) -> None:
        self._ask = bool(on)
        if self.state is not None:
            self.state.set(ASK_KEY, self._ask)

    @property
    def disabled(self) -> frozenset:
        """The names of the tools the user turned off."""
        return frozenset(self._disabled)

    def set_enabled(self, name: str, on: bool) -> None:
        (self._disabled.discard if on else self._disabled.add)(name)
        if self.state is not None:
            self.state.set(DISABLED_KEY, sorted(self._disabled))

    def servers(self) -> list:
        """[(ServerConfig, ServerStatus)] in mcp.json's order."""
        return [(s, self.hub.statuses[s.name]) for s in self.hub.servers] if self.hub is not None else []

    def tools(self) -> list:
        """The ToolInfo of every tool offered to the model: the ready servers', less those turned off; a name two
        servers use goes to the first."""
        seen, out = set(), []
        for t in self.hub.tools() if self.hub is not None else []:
            if t.name not in self.disabled and t.name not in seen:
                seen.add(t.name)
                out.append(t)
        return out

    def find(self, name: str):
        return next((t for t in self.tools() if t.name == name), None)

    def call(self, call_id: str, name: str, arguments: dict) -> None:
        """Run the tool `name`; call_finished(call_id, ToolResult) follows (also when it fails)."""
        tool = self.find(name)
        if tool is None or self.hub is None:
            offered = ", ".join(t.name for t in self.tools()) or "none"
            self.call_finished.emit(call_id, ToolResult(f'there is no tool "{name}" (the tools: {offered})', True))
            return
        self.hub.call(tool.server, name, arguments, lambda result: self._hub_done.emit(call_id, result),
                      self.timeout)

    def stop(self) -> bool:
        """End every session and the hub's thread; True when it ended (then `hub` is None)."""
        if self.hub is not None and not self.hub.close():
            return False
        self.hub = None
        return True

    def shutdown(self) -> None:
        self.stop()
