"""Per-model settings in the app's SQLite database, keyed by the model's absolute path."""
import json
import sqlite3

from app.models.info import model_key
from app.settings.values import clean


class SettingsStore:
    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def get(self, path: str) -> dict:
        """The user's overrides for the model at `path` ({} when none)."""
        row = self.conn.execute("SELECT value FROM model_settings WHERE model = ?", (model_key(path),)).fetchone()
        if row is None:
            return {}
        try:
            value = json.loads(row["value"])
        except ValueError:
            return {}
        return clean(value) if isinstance(value, dict) else {}

    def set(self, path: str, overrides: dict) -> None:
        self.conn.execute("INSERT OR REPLACE INTO model_settings(model, value) VALUES (?, ?)",
                          (model_key(path), json.dumps(clean(overrides))))
        self.conn.commit()
