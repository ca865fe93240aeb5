"""The remote backends the user added, in the database (name, base URL, the model ids last listed); each one's API
key is in the keyring (app.remote.keys), under the backend's id. A remote model's key is "remote:ID/MODEL", what
the settings, the recent list and the switcher store it under."""
import json
import sqlite3
from dataclasses import dataclass, field

PREFIX = "remote:"


@dataclass
class BackendRow:
    id: int
    name: str
    base_url: str
    models: list = field(default_factory=list)

    @property
    def account(self) -> str:
        return f"backend-{self.id}"


def remote_key(backend_id: int, model: str) -> str:
    return f"{PREFIX}{backend_id}/{model}"


def parse_remote_key(key: str) -> tuple[int, str] | None:
    """(backend id, model) of a remote model's key, else None."""
    if not key.startswith(PREFIX):
        return None
    ident, _, model = key[len(PREFIX):].partition("/")
    return (int(ident), model) if ident.isdigit() and model else None


def normalise_url(url: str) -> str:
    """The base URL as typed, without trailing slashes; one without a scheme is taken as http://."""
    url = url.strip().rstrip("/")
    if url and "://" not in url:
        url = "http://" + url
    return url


class BackendStore:
    def __init__(self, conn: sqlite3.Connection, keys):
        self.conn, self.keys = conn, keys

    def all(self) -> list[BackendRow]:
        rows = self.conn.execute("SELECT id, name, base_url, models FROM backends ORDER BY id").fetchall()
        return [BackendRow(r["id"], r["name"], r["base_url"], _models(r["models"])) for r in rows]

    def get(self, backend_id: int) -> BackendRow | None:
        return next((b for b in self.all() if b.id == backend_id), None)

    def add(self, name: str, base_url: str, api_key: str | None) -> BackendRow:
        base_url = normalise_url(base_url)
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        cur = self.conn.execute("INSERT INTO backends(name, base_url, models) VALUES (?, ?, '[]')",
                                (name.strip() or base_url, base_url))
        self.conn.commit()
        row = self.get(cur.lastrowid)
        self.keys.set(row.account, api_key)
        return row

    def remove(self, backend_id: int) -> None:
        row = self.get(backend_id)
        if row is not None:
            self.keys.delete(row.account)
        self.conn.execute("DELETE FROM backends WHERE id = ?", (backend_id,))
        self.conn.commit()

    def set_models(self, backend_id: int, models: list[str]) -> None:
        self.conn.execute("UPDATE backends SET models = ? WHERE id = ?", (json.dumps(list(models)), backend_id))
        self.conn.commit()

    def api_key(self, row: BackendRow) -> str | None:
        return self.keys.get(row.account)


def _models(text: str) -> list:
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [str(m) for m in value] if isinstance(value, list) else []
