"""The chat list's behaviour: new, open, rename, delete, search by title, export; and which chat was open, so a
restart reopens it."""
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.chat.export import export_chat

LAST_CHAT = "last_chat"


class ChatListController(QObject):
    def __init__(self, store, state, chat, chat_list, parent=None):
        """store: ChatStore; state: app.db.State; chat: ChatController; chat_list: ChatList."""
        super().__init__(parent)
        self.store, self.state, self.chat, self.list = store, state, chat, chat_list
        self.dialog = None                 # the last confirmation / file dialog opened (non-modal)
        chat_list.chat_selected.connect(self.open)
        chat_list.new_requested.connect(self.new)
        chat_list.rename_requested.connect(self.rename)
        chat_list.delete_requested.connect(self.confirm_delete)
        chat_list.export_requested.connect(self.choose_export_path)
        chat_list.search_changed.connect(lambda _text: self.refresh())
        chat.chats_changed.connect(self._on_chats_changed)

    def restore(self) -> None:
        """Open the chat that was open when the app last closed (else the most recent one)."""
        chats = self.store.chats()
        last = self.state.get(LAST_CHAT)
        chat_id = last if any(c.id == last for c in chats) else (chats[0].id if chats else None)
        self.chat.open_chat(chat_id)
        self.refresh()

    def refresh(self) -> None:
        self.list.set_chats(self.store.chats(self.list.search.text()), self.chat.chat_id)

    def open(self, chat_id: int) -> None:
        if chat_id != self.chat.chat_id:
            self.chat.open_chat(chat_id)
            self.state.set(LAST_CHAT, chat_id)

    def new(self) -> None:
        """A new, empty chat (an untouched empty one is reused rather than piling up)."""
        if self.chat.chat_id is not None and not self.chat.messages and not self.chat.busy:
            self.chat.composer.input.setFocus()
            return
        chat_id = self.store.create()
        self.chat.open_chat(chat_id)
        self.state.set(LAST_CHAT, chat_id)
        self.list.search.clear()
        self.refresh()
        self.chat.composer.input.setFocus()

    def rename(self, chat_id: int, title: str) -> None:
        self.store.rename(chat_id, title)
        self.refresh()

    def delete(self, chat_id: int) -> None:
        if chat_id == self.chat.chat_id:
            self.chat.settle(keep_partial=False)
        self.store.delete(chat_id)
        if chat_id == self.chat.chat_id:
            remaining = self.store.chats()
            self.chat.chat_id = None          # nothing to save a draft into
            self.chat.open_chat(remaining[0].id if remaining else None)
            self.state.set(LAST_CHAT, self.chat.chat_id)
        self.refresh()

    def confirm_delete(self, chat_id: int) -> None:
        info = self.store.get(chat_id)
        if info is None:
            return
        box = QMessageBox(QMessageBox.Icon.Question, "Delete chat", f"Delete the chat \u201c{info.title}\u201d?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self.list.window())
        box.button(QMessageBox.StandardButton.Yes).clicked.connect(lambda: self.delete(chat_id))
        self.dialog = box
        box.open()

    def export(self, chat_id: int, path: str) -> None:
        info = self.store.get(chat_id)
        if info is not None:
            export_chat(path, info, self.store.messages(chat_id))

    def choose_export_path(self, chat_id: int | None = None) -> None:
        chat_id = self.chat.chat_id if chat_id is None else chat_id
        info = self.store.get(chat_id) if chat_id is not None else None
        if info is None:
            return
        dialog = QFileDialog(self.list.window(), "Export chat", f"{_file_name(info.title)}.md",
                             "Markdown (*.md);;JSON (*.json)")
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.fileSelected.connect(lambda path: self.export(chat_id, _with_suffix(path, dialog.selectedNameFilter())))
        self.dialog = dialog
        dialog.open()

    def _on_chats_changed(self) -> None:
        self.state.set(LAST_CHAT, self.chat.chat_id)
        self.refresh()


def _file_name(title: str) -> str:
    keep = "".join(c if c.isalnum() or c in " -_" else " " for c in title)
    return "-".join(keep.split())[:60] or "chat"


def _with_suffix(path: str, name_filter: str) -> str:
    if path.lower().endswith((".md", ".json")):
        return path
    return path + (".json" if "json" in name_filter.lower() else ".md")
