"""The Petit desktop app (PySide6): `petit-app` / `python -m app`. See docs/app.md.

Organised by feature: app/chat (conversations, streaming, the chat list), app/models (opening models),
app/settings (per-model settings), app/training and app/server (their panels); the window, menus and status bar
at the top level. `petit` never imports this package or Qt.
"""
