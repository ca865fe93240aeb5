"""The MCP tools as the GUI sees them: reads mcp.json, runs the servers' sessions (a ToolHub on its own thread),
and says in Qt signals, on the GUI thread, when their state changes and when a call ends. It also keeps which tools
the user turned off, and whether a call is asked for before it runs."""
from PySide6.QtCore import QObject, Signal

from app.tools import config as mcp_config
from app.tools.client import CALL_TIMEOUT, ToolHub, ToolResult


class ToolsService(QObject):
    changed = Signal()                       # the servers' state, their tools or the config's errors changed
    call_finished = Signal(str, object)      # the call's id, its ToolResult
    _hub_changed = Signal()                  # from the hub's thread (queued to this object's)
    _hub_done = Signal(str, object)

    def __init__(self, path: str | None = None, parent=None):
        """path: the mcp.json to read (default: the one in the app's data folder)."""
        super().__init__(parent)
        self.path = path or mcp_config.default_path()
        self.errors: list = []               # the config's problems, as sentences
        self.disabled: set = set()           # names of the tools the user turned off
        self.ask = True                      # ask before running a tool
        self.timeout = CALL_TIMEOUT
        self.hub: ToolHub | None = None
        self._hub_changed.connect(self.changed)
        self._hub_done.connect(self.call_finished)

    def reload(self) -> None:
        """Read mcp.json again and restart the servers."""
        self.stop()
        cfg = mcp_config.load(self.path)
        self.errors = cfg.errors
        if cfg.servers:
            self.hub = ToolHub(cfg.servers, on_change=self._hub_changed.emit)
            self.hub.start()
        self.changed.emit()

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
        """End every session and the hub's thread; True when it ended."""
        hub, self.hub = self.hub, None
        return hub.close() if hub is not None else True

    def shutdown(self) -> None:
        self.stop()
