"""The Chat tab's layout: the chat list, the conversation over the message box, and the settings side panel, in a
splitter whose sizes the user can change."""
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from app.chat.chat_list import ChatList
from app.chat.composer import Composer
from app.chat.conversation import ConversationView
from app.library.switcher import ModelSwitcher


class ChatPage(QSplitter):
    def __init__(self, settings_panel, parent=None):
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.chat_list = ChatList()
        self.view = ConversationView()
        self.composer = Composer()
        self.switcher = ModelSwitcher()
        middle = QWidget()
        column = QVBoxLayout(middle)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        column.addWidget(self.switcher)
        column.addWidget(self.view, 1)
        column.addWidget(self.composer)
        self.settings_panel = settings_panel
        self.addWidget(self.chat_list)
        self.addWidget(middle)
        self.addWidget(settings_panel)
        self.setStretchFactor(0, 0)
        self.setStretchFactor(1, 1)
        self.setStretchFactor(2, 0)
        self.setCollapsible(1, False)
        self.setSizes([200, 620, 330])

    def toggle_settings(self) -> None:
        self.settings_panel.setVisible(not self.settings_panel.isVisible())

    def toggle_chat_list(self) -> None:
        self.chat_list.setVisible(not self.chat_list.isVisible())
