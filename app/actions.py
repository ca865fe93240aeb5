"""The main window's menus, actions and keyboard shortcuts (SHORTCUTS lists them for Help > Keyboard shortcuts)."""
import html
import os

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMessageBox

SHORTCUTS = (
    ("Ctrl+N", "new chat"), ("Ctrl+O", "open a model file"), ("Ctrl+Shift+O", "open a Hugging Face folder"),
    ("Enter, Ctrl+Enter", "send"), ("Shift+Enter", "new line"), ("Esc", "stop the reply (or leave editing)"),
    ("Ctrl+R", "regenerate the last reply"), ("Ctrl+Shift+C", "copy the last reply"),
    ("Ctrl+E", "export the chat"), ("F2", "rename the chat"), ("Ctrl+F", "search the chats"),
    ("Ctrl+L", "go to the message box"), ("Ctrl+,", "show or hide the settings"),
    ("Ctrl+B", "show or hide the chat list"), ("Ctrl+Q", "quit"),
)


def shortcuts_html() -> str:
    """The shortcuts as a two-column table, in the dialog's own font."""
    rows = "".join(f"<tr><td><b>{html.escape(keys)}</b>&nbsp;&nbsp;</td><td>{html.escape(what)}</td></tr>"
                   for keys, what in SHORTCUTS)
    return f"<table>{rows}</table>"


def _action(window, text, slot, shortcut=None, tip=None) -> QAction:
    action = QAction(text, window)
    if shortcut is not None:
        action.setShortcuts([QKeySequence(s) for s in shortcut] if isinstance(shortcut, list)
                            else [QKeySequence(shortcut)])
    if tip:
        action.setStatusTip(tip)
    action.triggered.connect(lambda _checked=False: slot())
    window.addAction(action)           # shortcuts work whichever widget has the focus
    return action


def build_menus(window) -> dict:
    """Create the menus of `window` (a MainWindow); returns the actions by name."""
    w = window
    a = {
        "new_chat": _action(w, "&New chat", w.chats.new, "Ctrl+N"),
        "open_model": _action(w, "&Open model…", w.choose_model_file, "Ctrl+O", "Open a .petit or GGUF model file"),
        "open_folder": _action(w, "Open model &folder…", w.choose_model_folder, "Ctrl+Shift+O",
                               "Open a Hugging Face model folder (config.json, safetensors, tokenizer.json)"),
        "open_default": _action(w, "Open the &bundled model", w.open_default_model),
        "export": _action(w, "&Export chat…", lambda: w.chats.choose_export_path(), "Ctrl+E",
                          "Save the chat as Markdown or JSON"),
        "quit": _action(w, "&Quit", w.close, "Ctrl+Q"),
        "send": _action(w, "&Send", w.chat.composer.submit, ["Ctrl+Return", "Ctrl+Enter"]),
        "stop": _action(w, "S&top", w.escape, "Esc", "Stop the reply"),
        "regenerate": _action(w, "&Regenerate", w.chat.regenerate, "Ctrl+R", "Answer the last message again"),
        "continue": _action(w, "Contin&ue the reply", w.chat.continue_reply, None,
                            "Go on with the last reply (interrupted, stopped or cut at the token limit)"),
        "copy_last": _action(w, "&Copy the last reply", w.copy_last_reply, "Ctrl+Shift+C"),
        "rename": _action(w, "Re&name chat", w.page.chat_list.start_rename, "F2"),
        "delete": _action(w, "&Delete chat…", lambda: w.chats.confirm_delete(w.chat.chat_id)
                          if w.chat.chat_id is not None else None),
        "search": _action(w, "Search &chats", w.page.chat_list.search.setFocus, "Ctrl+F"),
        "focus_input": _action(w, "Go to the &message box", w.page.composer.input.setFocus, "Ctrl+L"),
        "settings": _action(w, "&Settings panel", w.page.toggle_settings, "Ctrl+,"),
        "chat_list": _action(w, "Chat &list", w.page.toggle_chat_list, "Ctrl+B"),
        "shortcuts": _action(w, "&Keyboard shortcuts", lambda: _info(w, "Keyboard shortcuts", shortcuts_html())),
        "about": _action(w, "&About Petit", lambda: _about(w)),
    }
    bar = w.menuBar()
    file_menu = bar.addMenu("&File")
    file_menu.addActions([a["new_chat"], a["open_model"], a["open_folder"]])
    w.recent_menu = file_menu.addMenu("Open &recent")
    w.recent_menu.aboutToShow.connect(lambda: fill_recent(w))
    file_menu.addAction(a["open_default"])
    file_menu.addSeparator()
    file_menu.addAction(a["export"])
    file_menu.addSeparator()
    file_menu.addAction(a["quit"])
    chat_menu = bar.addMenu("&Chat")
    chat_menu.addActions([a["send"], a["stop"], a["regenerate"], a["continue"], a["copy_last"]])
    chat_menu.addSeparator()
    chat_menu.addActions([a["rename"], a["delete"], a["search"], a["focus_input"]])
    view_menu = bar.addMenu("&View")
    view_menu.addActions([a["settings"], a["chat_list"]])
    help_menu = bar.addMenu("&Help")
    help_menu.addActions([a["shortcuts"], a["about"]])
    return a


def fill_recent(window) -> None:
    menu = window.recent_menu
    menu.clear()
    paths = window.models.recent.paths()
    if not paths:
        menu.addAction("(none yet)").setEnabled(False)
    for path in paths:
        action = menu.addAction(os.path.basename(path) or path)
        action.setToolTip(path)
        action.setStatusTip(path)
        action.triggered.connect(lambda _checked=False, p=path: window.open_model(p))


def _info(window, title: str, rich_text: str) -> None:
    """A non-modal information box (in the normal font: no <pre>)."""
    box = QMessageBox(QMessageBox.Icon.Information, title, title, QMessageBox.StandardButton.Ok, window)
    box.setInformativeText(rich_text)
    window.info_dialog = box
    box.open()


def _about(window) -> None:
    from petit import __version__
    _info(window, "About Petit", f"<p>Petit {__version__}: small language models on your CPU.</p>"
                                 "<p>Everything runs on this computer: no network, no telemetry.</p>")
