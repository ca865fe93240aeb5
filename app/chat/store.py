"""Conversations in SQLite: a list of chats (create, rename, delete, search by title) and each chat's messages in
order. A message is a dict {"role", "content", "meta"}; meta holds what the view shows beside it (the model, the
turn's stats, how the reply ended: a reply still streaming is stored with finish_reason "interrupted", so
that is what it says if the app dies before the reply ends)."""
import json
import sqlite3
import time
from dataclasses import dataclass, field

NEW_CHAT_TITLE = "New chat"
INTERRUPTED = "interrupted"          # the finish_reason a reply is stored with while it streams


@dataclass
class Message:
    role: str                       # "user", "assistant" or "tool" (a tool's result: app/tools)
    content: str
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"role": self.role, "content": self.content, "meta": dict(self.meta)}


@dataclass
class ChatInfo:
    id: int
    title: str
    created: float
    updated: float


class ChatStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    # chats
    def create(self, title: str = NEW_CHAT_TITLE) -> int:
        now = time.time()
        cur = self.conn.execute("INSERT INTO chats(title, created, updated) VALUES (?, ?, ?)", (title, now, now))
        self.conn.commit()
        return cur.lastrowid

    def rename(self, chat_id: int, title: str) -> None:
        title = " ".join(title.split()) or NEW_CHAT_TITLE
        self.conn.execute("UPDATE chats SET title = ? WHERE id = ?", (title, chat_id))
        self.conn.commit()

    def delete(self, chat_id: int) -> None:
        self.conn.execute("DELETE FROM chats WHERE id = ?", (chat_id,))
        self.conn.commit()

    def get(self, chat_id: int) -> ChatInfo | None:
        row = self.conn.execute("SELECT id, title, created, updated FROM chats WHERE id = ?", (chat_id,)).fetchone()
        return ChatInfo(**dict(row)) if row else None

    def chats(self, search: str = "") -> list[ChatInfo]:
        """Chats whose title contains `search` (case-insensitive), the most recently updated first."""
        pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self.conn.execute(
            "SELECT id, title, created, updated FROM chats WHERE title LIKE ? ESCAPE '\\' "
            "ORDER BY updated DESC, id DESC", (pattern,)).fetchall()
        return [ChatInfo(**dict(r)) for r in rows]

    def draft(self, chat_id: int) -> str:
        row = self.conn.execute("SELECT draft FROM chats WHERE id = ?", (chat_id,)).fetchone()
        return row["draft"] if row else ""

    def set_draft(self, chat_id: int, text: str) -> None:
        self.conn.execute("UPDATE chats SET draft = ? WHERE id = ?", (text, chat_id))
        self.conn.commit()

    # messages
    def messages(self, chat_id: int) -> list[Message]:
        rows = self.conn.execute("SELECT role, content, meta FROM messages WHERE chat_id = ? ORDER BY position",
                                 (chat_id,)).fetchall()
        return [Message(r["role"], r["content"], json.loads(r["meta"])) for r in rows]

    def append(self, chat_id: int, message: Message) -> int:
        """Add a message at the end; the first user message also names a chat still called "New chat"."""
        now = time.time()
        (count,) = self.conn.execute("SELECT COUNT(*) FROM messages WHERE chat_id = ?", (chat_id,)).fetchone()
        self.conn.execute("INSERT INTO messages(chat_id, position, role, content, meta, created) "
                          "VALUES (?, ?, ?, ?, ?, ?)",
                          (chat_id, count, message.role, message.content, json.dumps(message.meta), now))
        self.conn.execute("UPDATE chats SET updated = ? WHERE id = ?", (now, chat_id))
        if message.role == "user":
            self.conn.execute("UPDATE chats SET title = ? WHERE id = ? AND title = ?",
                              (title_from(message.content), chat_id, NEW_CHAT_TITLE))
        self.conn.commit()
        return count

    def update(self, chat_id: int, position: int, message: Message) -> None:
        """Rewrite the message at `position` (a reply saved while it streams)."""
        self.conn.execute("UPDATE messages SET content = ?, meta = ? WHERE chat_id = ? AND position = ?",
                          (message.content, json.dumps(message.meta), chat_id, position))
        self.conn.commit()

    def truncate(self, chat_id: int, keep: int) -> None:
        """Delete every message from position `keep` on (editing a message, regenerating a reply). A chat named
        after its first message goes back to "New chat" when that message goes, so the edited one names it."""
        if keep == 0:
            first = self.conn.execute("SELECT content FROM messages WHERE chat_id = ? AND position = 0 AND "
                                      "role = 'user'", (chat_id,)).fetchone()
            if first is not None:
                self.conn.execute("UPDATE chats SET title = ? WHERE id = ? AND title = ?",
                                  (NEW_CHAT_TITLE, chat_id, title_from(first["content"])))
        self.conn.execute("DELETE FROM messages WHERE chat_id = ? AND position >= ?", (chat_id, keep))
        self.conn.execute("UPDATE chats SET updated = ? WHERE id = ?", (time.time(), chat_id))
        self.conn.commit()


def title_from(text: str, limit: int = 40) -> str:
    words = " ".join(text.split())
    if len(words) <= limit:
        return words or NEW_CHAT_TITLE
    return words[:limit].rsplit(" ", 1)[0] + "…"
