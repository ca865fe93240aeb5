"""The main window: the Chat tab (chat list, conversation, settings), the Models and Documents tabs, the Train /
Export / Verify / Server panels, the menus, the status bar, dropping a model on the window, and an orderly shutdown
(every thread stopped and joined)."""
import os

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QMainWindow, QTabWidget

from app.actions import build_menus
from app.chat.chat_list_controller import ChatListController
from app.chat.client import GenerationClient
from app.chat.code_blocks import warm_up
from app.chat.controller import ChatController
from app.chat.links import confirm_open_link
from app.chat.page import ChatPage
from app.chat.store import ChatStore
from app.db import State, connect
from app.documents.panel import DocumentsPanel
from app.library.library import ModelLibrary
from app.library.panel import ModelsPanel
from app.models import dialogs
from app.models.manager import ModelManager
from app.models.recent import RecentModels
from app.remote.api import Backend
from app.remote.backends import BackendStore, parse_remote_key
from app.remote.keys import KeyStore
from app.remote.panel import BackendsBox
from app.server import ServerPanel
from app.settings.panel import SettingsPanel
from app.settings.store import SettingsStore
from app.status import StatusBar
from app.style import STATUS_STYLE
from app.theme import CHOICES, Theme
from app.tools.panel import ToolsPanel
from app.tools.service import ToolsService
from app.tools.turns import ToolTurns
from app.training import ExportPanel, FinetunePanel, TrainPanel, VerifyPanel

LAST_MODEL = "last_model"
GEOMETRY = "window_geometry"         # the window's and the chat splitter's, restored at start
# the tabs after Chat: (title, panel class); window.panels holds them by title. A panel may have
# `chat_with_model = Signal(str)` (the window loads that model into the chat) and `shutdown()` (called as the window
# closes: it stops and joins its threads); the Server panel's set_model(path, options) hears of every model loaded.
PANELS = (("Train", TrainPanel), ("Fine-tune", FinetunePanel), ("Export", ExportPanel), ("Verify", VerifyPanel),
          ("Server", ServerPanel))


def is_bundled_model(path: str) -> bool:
    """Whether `path` is one of the models that ship with Petit (assets/default-*.petit)."""
    from petit.assets import asset_dirs
    folders = {os.path.realpath(d) for d in asset_dirs()}
    return os.path.basename(path).startswith("default-") and os.path.realpath(os.path.dirname(path)) in folders


class MainWindow(QMainWindow):
    def __init__(self, model_path: str | None = None, parent=None):
        """model_path: the model to open (default: the last one used, else the bundled model)."""
        super().__init__(parent)
        self.setWindowTitle("Petit")
        self.resize(1100, 720)
        self.setAcceptDrops(True)
        self.conn = connect()
        self.state = State(self.conn)
        self.generation = GenerationClient(self)
        self.settings_panel = SettingsPanel(SettingsStore(self.conn))
        self.page = ChatPage(self.settings_panel)
        store = ChatStore(self.conn)
        self.chat = ChatController(store, self.generation, self.page.view, self.page.composer,
                                   lambda: {**self.settings_panel.options(), **self.tool_turns.options()}, self)
        self.tools = ToolsService(self.state, parent=self)      # the MCP servers' tools (app/tools)
        self.tool_turns = ToolTurns(self.tools, self.chat, self)
        self.chats = ChatListController(store, self.state, self.chat, self.page.chat_list, self)
        self.models = ModelManager(self.generation, self.settings_panel.store, RecentModels(self.conn), self)
        warm_up()
        self.theme = Theme(self.state, self.page.view, self)   # styles the conversation (style sheets only where
        for value, text in CHOICES:                             # needed: they slow painting)
            self.settings_panel.theme_combo.addItem(text, value)
        self.settings_panel.theme_combo.setCurrentIndex(self.settings_panel.theme_combo.findData(self.theme.choice))
        self.settings_panel.theme_combo.activated.connect(
            lambda i: self.theme.set_choice(self.settings_panel.theme_combo.itemData(i)))
        self.status = StatusBar(self)
        self.status.setStyleSheet(STATUS_STYLE)
        self.setStatusBar(self.status)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.page, "Chat")
        self.library = ModelLibrary(self.state, self)
        self.models_panel = ModelsPanel(self.library, self.settings_panel.store)
        self.backends = BackendStore(self.conn, KeyStore())
        self.backends_box = BackendsBox(self.backends)
        self.models_panel.layout().addWidget(self.backends_box)
        self.models.remote_resolver = self._resolve_remote
        self.tabs.addTab(self.models_panel, "Models")
        self.documents = DocumentsPanel()          # the files the chat can draw on (issue 35)
        self.tabs.addTab(self.documents, "Documents")
        self.chat.sources_for = self.documents.sources_for
        self.panels = {}
        for title, cls in PANELS:
            self.panels[title] = cls(parent=None)
            self.tabs.addTab(self.panels[title], title)
        self.tools_panel = ToolsPanel(self.tools)
        self.tabs.addTab(self.tools_panel, "Tools")
        self.setCentralWidget(self.tabs)
        self.error_dialog = self.confirm_dialog = self.file_dialog = self.info_dialog = self.link_dialog = None
        self.menu_actions = build_menus(self)
        self._connect()
        self.chats.restore()
        self._restore_geometry()
        self.page.composer.input.setFocus()
        self.open_model(model_path or self._startup_model())
        self.library.refresh()
        self.tools.reload()

    def _connect(self) -> None:
        m, s = self.models, self.status
        m.loading_started.connect(s.set_loading)
        m.loading_started.connect(lambda *_: self.chat.model_loading(True))
        m.loading_ended.connect(lambda: s.set_loading(None))
        m.load_failed.connect(self._on_load_failed)
        m.confirmation_needed.connect(self._confirm_load)
        m.model_loaded.connect(self._on_model_loaded)
        s.cancel_load_requested.connect(m.cancel)
        s.cancel_load_requested.connect(lambda: self.chat.model_loading(False))
        self.chat.turn_finished.connect(s.set_turn)
        self.chat.context_measured.connect(s.set_context)
        self.chat.busy_changed.connect(self._on_busy)
        self.page.view.link_activated.connect(self.confirm_open_link)
        self.settings_panel.changed.connect(lambda _key: self.chat.measure())
        self.settings_panel.reload_requested.connect(m.reload)
        self.models_panel.open_requested.connect(self.open_in_chat)
        self.library.scanned.connect(self.page.switcher.set_local)
        self.page.switcher.model_chosen.connect(self.open_model)
        self.backends_box.models_changed.connect(self.page.switcher.set_remote)
        self.backends_box._show()
        for panel in self.panels.values():
            signal = getattr(panel, "chat_with_model", None)
            if signal is not None:
                signal.connect(self.chat_with_model)
        self._on_busy(False)

    # models
    def _startup_model(self) -> str | None:
        last = self.state.get(LAST_MODEL)
        if last and os.path.exists(last):
            return last
        return self.default_model_path()

    def default_model_path(self) -> str | None:
        from petit.assets import default_model_path
        try:
            return default_model_path()
        except FileNotFoundError as e:
            self.error_dialog = dialogs.load_error(self, "the bundled model", str(e))
            return None

    def open_model(self, path: str | None, confirmed: bool = False) -> None:
        if path:
            self.models.open(path, confirmed)

    def open_default_model(self) -> None:
        self.open_model(self.default_model_path(), confirmed=True)

    def choose_model_file(self) -> None:
        self.file_dialog = dialogs.choose_model_file(self, self.open_model, self._model_folder())

    def choose_model_folder(self) -> None:
        self.file_dialog = dialogs.choose_model_folder(self, self.open_model, self._model_folder())

    def _model_folder(self) -> str:
        info = self.models.info
        return os.path.dirname(info.path) if info is not None else os.path.expanduser("~")

    def chat_with_model(self, path: str) -> None:
        """Load a model (e.g. one just exported) and chat with it in a new chat."""
        self.tabs.setCurrentWidget(self.page)
        self.open_model(path, confirmed=True)
        self.chats.new()

    def open_in_chat(self, path: str) -> None:
        """A model chosen in the Models tab: load it, and go back to the chat."""
        self.tabs.setCurrentWidget(self.page)
        self.open_model(path)

    def _resolve_remote(self, key: str) -> tuple:
        """The backend (with its key from the keyring) and model of a remote model's key."""
        parsed = parse_remote_key(key)
        row = self.backends.get(parsed[0]) if parsed else None
        if row is None:
            raise ValueError(f"{key}: that remote backend was removed")
        return Backend(row.base_url, self.backends.api_key(row), row.name), parsed[1]

    def _confirm_load(self, path: str, why: str) -> None:
        self.confirm_dialog = dialogs.confirm_load(self, path, why, lambda: self.open_model(path, confirmed=True))

    def _on_load_failed(self, path: str, message: str) -> None:
        self.error_dialog = dialogs.load_error(self, path, message)
        self.chat.model_loading(False)

    def _on_model_loaded(self, info) -> None:
        self.state.set(LAST_MODEL, info.path)
        self.setWindowTitle(f"Petit — {info.name}")
        self.status.set_model(info)
        self.page.switcher.set_recent(self.models.recent.paths())
        self.page.switcher.set_current(info.path, info.name)
        self.settings_panel.set_model(info)
        self.chat.set_model(info.name, is_bundled_model(info.path))
        if info.weight_type != "remote":            # the Server tab serves local models only
            values = self.settings_panel.values()
            self.panels["Server"].set_model(info.path, {k: values[k] for k in values})

    def confirm_open_link(self, url) -> None:
        """A link in a reply was clicked: open it in the browser once the user confirms."""
        self.link_dialog = confirm_open_link(self, url)

    # chat helpers for the menus
    def escape(self) -> None:
        """Esc: stop the reply in progress, else leave editing a message."""
        if self.chat.busy:
            self.chat.stop()
        else:
            self.page.composer.cancel_edit()

    def copy_last_reply(self) -> None:
        for i in range(len(self.chat.messages) - 1, -1, -1):
            if self.chat.messages[i].role == "assistant":
                self.chat.copy(i)
                return

    def _on_busy(self, busy: bool) -> None:
        self.menu_actions["regenerate"].setEnabled(not busy)
        self.menu_actions["continue"].setEnabled(not busy)

    # drag and drop
    def dragEnterEvent(self, event) -> None:
        if dialogs.dropped_model_path(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        path = dialogs.dropped_model_path(event.mimeData())
        if path:
            event.acceptProposedAction()
            self.open_model(path)

    def _restore_geometry(self) -> None:
        saved = self.state.get(GEOMETRY)
        if isinstance(saved, dict):
            self.restoreGeometry(QByteArray.fromBase64(saved.get("window", "").encode()))
            self.page.restoreState(QByteArray.fromBase64(saved.get("splitter", "").encode()))

    def _save_geometry(self) -> None:
        self.state.set(GEOMETRY, {"window": bytes(self.saveGeometry().toBase64()).decode(),
                                  "splitter": bytes(self.page.saveState().toBase64()).decode()})

    # shutdown
    def closeEvent(self, event) -> None:
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Stop generating and loading, join every thread, save what is unsaved. Safe to call twice."""
        if self.conn is None:
            return
        self.chat.shutdown()
        self.settings_panel.flush()
        self._save_geometry()
        for panel in self.panels.values():
            if hasattr(panel, "shutdown"):
                panel.shutdown()
        self.library.shutdown()
        self.documents.shutdown()
        self.backends_box.shutdown()
        self.theme.shutdown()
        self.models.shutdown()
        self.tools.shutdown()
        self.generation.shutdown()
        for obj in (self.models, self.generation, self.chat):
            obj.blockSignals(True)          # nothing queued may reach the closed database
        self.conn.close()
        self.conn = None
