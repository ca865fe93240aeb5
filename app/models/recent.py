"""The recent-models list (most recent first), kept in the app's SQLite database."""
import os
import sqlite3
import time

from app.models.info import model_key

LIMIT = 10


class RecentModels:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def add(self, path: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO recent_models(path, opened) VALUES (?, ?)",
                          (model_key(path), time.time()))
        self.conn.execute("DELETE FROM recent_models WHERE path NOT IN "
                          "(SELECT path FROM recent_models ORDER BY opened DESC LIMIT ?)", (LIMIT,))
        self.conn.commit()

    def remove(self, path: str) -> None:
        self.conn.execute("DELETE FROM recent_models WHERE path = ?", (model_key(path),))
        self.conn.commit()

    def paths(self) -> list[str]:
        """The recent models that still exist, most recent first."""
        rows = self.conn.execute("SELECT path FROM recent_models ORDER BY opened DESC").fetchall()
        return [r["path"] for r in rows if os.path.exists(r["path"])]
