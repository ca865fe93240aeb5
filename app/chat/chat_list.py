"""The list of chats beside the conversation: search by title, New chat, and rename / export / delete from the
context menu (double-click or F2 renames in place)."""
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QLineEdit, QListWidget, QListWidgetItem, QMenu, QPushButton,
                               QVBoxLayout, QWidget)

from app.chat.store import ChatInfo

ID_ROLE = Qt.ItemDataRole.UserRole


class ChatList(QWidget):
    chat_selected = Signal(int)
    new_requested = Signal()
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    export_requested = Signal(int)
    search_changed = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 0, 8)
        self.new_button = QPushButton("New chat")
        self.new_button.setToolTip("Start a new chat (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        layout.addWidget(self.new_button)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search chats")
        self.search.setAccessibleName("Search chats by title")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self.search_changed)
        layout.addWidget(self.search)
        self.list = QListWidget()
        self.list.setAccessibleName("Chats")
        self.list.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                                  | QAbstractItemView.EditTrigger.EditKeyPressed)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._on_current)
        self.list.itemChanged.connect(self._on_item_changed)
        layout.addWidget(self.list, 1)
        self._filling = False

    def set_chats(self, chats: list[ChatInfo], current: int | None) -> None:
        self._filling = True
        self.list.clear()
        for chat in chats:
            item = QListWidgetItem(chat.title)
            item.setData(ID_ROLE, chat.id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
            item.setToolTip(chat.title)
            self.list.addItem(item)
            if chat.id == current:
                self.list.setCurrentItem(item)
        self._filling = False

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return item.data(ID_ROLE) if item else None

    def titles(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def start_rename(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self.list.editItem(item)

    def _on_current(self, item, _previous) -> None:
        if item is not None and not self._filling:
            self.chat_selected.emit(item.data(ID_ROLE))

    def _on_item_changed(self, item) -> None:
        if not self._filling:
            self.rename_requested.emit(item.data(ID_ROLE), item.text())

    def _menu(self, pos) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        chat_id = item.data(ID_ROLE)
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.list.editItem(item))
        menu.addAction("Export…", lambda: self.export_requested.emit(chat_id))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.delete_requested.emit(chat_id))
        menu.popup(self.list.viewport().mapToGlobal(pos))
