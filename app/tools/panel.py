"""The Tools tab: the MCP servers of mcp.json with their state and tools (each tool can be turned off), what is wrong
with the file or a server, "ask before running a tool", and Reload (read mcp.json again, restart the servers)."""
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPushButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, \
    QWidget

STATES = {"starting": "starting…", "ready": "ready", "failed": "failed", "disabled": "disabled in mcp.json",
          "stopped": "stopped"}


class ToolsPanel(QWidget):
    def __init__(self, service, parent=None):
        super().__init__(parent)
        self.service = service
        layout = QVBoxLayout(self)
        self.intro = QLabel(f"MCP servers from <code>{service.path}</code> (the format Claude Desktop and LM Studio "
                            "use). Their tools are offered to the model in the chat.")
        self.intro.setWordWrap(True)
        self.intro.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.intro)
        row = QHBoxLayout()
        self.ask_box = QCheckBox("Ask before running a tool")
        self.ask_box.setChecked(service.ask)
        self.ask_box.toggled.connect(lambda on: setattr(service, "ask", on))
        row.addWidget(self.ask_box)
        row.addStretch(1)
        self.reload_button = QPushButton("Reload")
        self.reload_button.setToolTip("Read mcp.json again and restart its servers")
        self.reload_button.clicked.connect(service.reload)
        row.addWidget(self.reload_button)
        layout.addLayout(row)
        self.errors = QLabel()
        self.errors.setObjectName("toolErrors")
        self.errors.setWordWrap(True)
        self.errors.setStyleSheet("QLabel#toolErrors { color: #a40000; }")
        self.errors.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.errors)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Server / tool", "State / description"])
        self.tree.setAccessibleName("MCP servers and their tools")
        self.tree.itemChanged.connect(self._on_item_changed)
        layout.addWidget(self.tree, 1)
        service.changed.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        """Show the servers, their tools and the errors as they are now."""
        problems = list(self.service.errors)
        self.tree.blockSignals(True)
        self.tree.clear()
        for server, status in self.service.servers():
            item = QTreeWidgetItem([server.name, STATES.get(status.state, status.state)])
            self.tree.addTopLevelItem(item)
            if status.error:
                problems.append(status.error)
            for tool in status.tools:
                child = QTreeWidgetItem([tool.name, tool.description])
                child.setFlags(child.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                off = tool.name in self.service.disabled
                child.setCheckState(0, Qt.CheckState.Unchecked if off else Qt.CheckState.Checked)
                child.setData(0, Qt.ItemDataRole.UserRole, tool.name)
                item.addChild(child)
            item.setExpanded(True)
        self.tree.blockSignals(False)
        self.errors.setText("\n".join(problems))
        self.errors.setVisible(bool(problems))

    def _on_item_changed(self, item, column: int) -> None:
        name = item.data(0, Qt.ItemDataRole.UserRole)
        if name is None:
            return
        self.service.set_enabled(name, item.checkState(0) == Qt.CheckState.Checked)
