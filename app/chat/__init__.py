"""The chat: conversations stored in SQLite, streamed replies from a worker thread, the chat list."""
