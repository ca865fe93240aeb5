"""The Tools tab: the MCP servers of mcp.json with their state and tools (each tool can be turned off), what is wrong
with the file or a server, "ask before running a tool", which file to read (another app's mcp.json, or the default),
and Reload (read mcp.json again, restart the servers)."""
import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QFileDialog, QHBoxLayout, QLabel, QPushButton, QTreeWidget, QTreeWidgetItem, \
    QVBoxLayout, QWidget

STATES = {"starting": "starting…", "ready": "ready", "failed": "failed", "disabled": "disabled in mcp.json",
          "stopped": "stopped"}


class ToolsPanel(QWidget):
    def __init__(self, service, parent=None):
        super().__init__(parent)
        self.service = service
        layout = QVBoxLayout(self)
        self.intro = QLabel()
        self.intro.setWordWrap(True)
        self.intro.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.intro)
        row = QHBoxLayout()
        self.ask_box = QCheckBox("Ask before running a tool")
        self.ask_box.setChecked(service.ask)
        self.ask_box.toggled.connect(lambda on: setattr(service, "ask", on))
        row.addWidget(self.ask_box)
        row.addStretch(1)
        self.choose_button = QPushButton("Use another file…")
        self.choose_button.setToolTip("Read the servers from another mcp.json (Claude Desktop's config file works)")
        self.choose_button.clicked.connect(self.choose_file)
        row.addWidget(self.choose_button)
        self.default_button = QPushButton("Use the default file")
        self.default_button.setToolTip("Read the servers from mcp.json in the app's data folder again")
        self.default_button.clicked.connect(lambda: service.use_file(None))
        row.addWidget(self.default_button)
        self.file_dialog: QFileDialog | None = None     # the open "Use another file" dialog (not modal)
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

    def choose_file(self) -> None:
        """Ask for the file to read the servers from (a non-modal dialog: the window stays usable)."""
        self.file_dialog = QFileDialog(self, "MCP servers file", self.service.path,
                                       "JSON files (*.json);;All files (*)")
        self.file_dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        self.file_dialog.fileSelected.connect(self.service.use_file)
        self.file_dialog.open()

    def refresh(self) -> None:
        """Show the servers, their tools and the errors as they are now."""
        self.intro.setText(f"MCP servers from <code>{html.escape(self.service.path)}</code> (the format Claude "
                           "Desktop and LM Studio use). Their tools are offered to the model in the chat.")
        self.default_button.setEnabled(not self.service.is_default)
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
