"""The documents index: a SQLite file beside the app's database (WAL, so the chat reads while the indexing thread
writes) holding the files and folders the user added (roots), each indexed file (path, mtime, size, SHA-256, or the
error that kept it out), its passages with their location, an FTS5 table over the passages (BM25), and each
passage's embedding as a float32 blob when an embedding model is chosen.

`sync` brings the index in step with the roots: a file is read again only when its mtime or size changed and its
content hash did too; files gone from the roots are dropped; passages without a vector of the chosen model are
embedded. One DocumentIndex per thread (a SQLite connection stays on the thread that opened it)."""
import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass, field

import numpy as np

from app.documents.chunks import split
from app.documents.readers import ReadError, read_document, readable

SCHEMA = """
CREATE TABLE IF NOT EXISTS roots (path TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    mtime REAL NOT NULL,
    size INTEGER NOT NULL,
    sha TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    first_line INTEGER NOT NULL,
    last_line INTEGER NOT NULL,
    page INTEGER,
    vector BLOB
);
CREATE INDEX IF NOT EXISTS passages_by_doc ON passages(doc_id, position);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(text, tokenize='porter unicode61');
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
EMBED_BATCH = 16


@dataclass
class SyncResult:
    """What a sync did: files read for the first time, read again (changed), left alone, dropped; the files that
    could not be read (their error messages); passages embedded; whether it was cancelled part way."""
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    errors: list = field(default_factory=list)
    embedded: int = 0
    cancelled: bool = False


@dataclass
class DocumentInfo:
    path: str
    passages: int
    error: str


def file_sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def walk(root: str) -> list[str]:
    """The readable files of a root (itself when it is a file), hidden files and folders left out, sorted."""
    if os.path.isfile(root):
        return [os.path.abspath(root)]
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [os.path.abspath(os.path.join(folder, f)) for f in sorted(files)
                if not f.startswith(".") and readable(f)]
    return out


class DocumentIndex:
    def __init__(self, path: str):
        """Open (creating if needed) the index at `path` (":memory:" for a throwaway one)."""
        self.path = path
        self.conn = sqlite3.connect(path)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = NORMAL")
        self.conn.executescript(SCHEMA)
        self.conn.commit()
        self._vectors = None          # (version, ids, matrix) of the last vectors() call

    def close(self) -> None:
        self.conn.close()

    # roots
    def roots(self) -> list[str]:
        return [r["path"] for r in self.conn.execute("SELECT path FROM roots ORDER BY path")]

    def add_root(self, path: str) -> None:
        """Add a file or folder (indexed at the next sync). ValueError when it does not exist."""
        if not os.path.exists(path):
            raise ValueError(f"{path}: no such file or folder")
        self.conn.execute("INSERT OR IGNORE INTO roots(path) VALUES (?)", (os.path.abspath(path),))
        self.conn.commit()

    def remove_root(self, path: str) -> None:
        """Remove a file or folder (its documents go at the next sync)."""
        self.conn.execute("DELETE FROM roots WHERE path = ?", (path,))
        self.conn.commit()

    def files(self) -> list[str]:
        """Every readable file under the roots that exist, once each."""
        seen: dict[str, None] = {}
        for root in self.roots():
            if os.path.exists(root):
                seen.update(dict.fromkeys(walk(root)))
        return list(seen)

    # what is indexed
    def documents(self) -> list[DocumentInfo]:
        rows = self.conn.execute("SELECT d.path, d.error, COUNT(p.id) AS n FROM documents d LEFT JOIN passages p "
                                 "ON p.doc_id = d.id GROUP BY d.id ORDER BY d.path").fetchall()
        return [DocumentInfo(r["path"], r["n"], r["error"]) for r in rows]

    def passage_count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM passages").fetchone()[0]

    def passage(self, passage_id: int) -> dict | None:
        """{"id", "path", "text", "first_line", "last_line", "page"} of a passage."""
        row = self.conn.execute("SELECT p.id, d.path, p.text, p.first_line, p.last_line, p.page FROM passages p "
                                "JOIN documents d ON d.id = p.doc_id WHERE p.id = ?", (passage_id,)).fetchone()
        return dict(row) if row else None

    def setting(self, key: str, default=None):
        """A value the Documents panel keeps with its index (the embedding model, whether the chat uses it)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", ("setting." + key,)).fetchone()
        return default if row is None else json.loads(row["value"])

    def set_setting(self, key: str, value) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                          ("setting." + key, json.dumps(value)))
        self.conn.commit()

    def embedder_key(self) -> str:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        return row["value"] if row else ""

    def version(self) -> int:
        """Changes whenever a passage or a vector is written (SQLite's data_version sees other connections')."""
        return self.conn.execute("PRAGMA data_version").fetchone()[0] + self.conn.total_changes

    def bm25(self, match: str, limit: int) -> list[tuple[int, float]]:
        """(id, BM25 score, higher is better) of the passages FTS5 ranks best for the query expression `match`,
        best first."""
        if not match:
            return []
        rows = self.conn.execute("SELECT rowid, -bm25(passages_fts) FROM passages_fts WHERE passages_fts MATCH ? "
                                 "ORDER BY bm25(passages_fts) LIMIT ?", (match, limit)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids [n], matrix [n, dim] float32) of every passage that has a vector; cached until the index changes."""
        version = self.version()
        if self._vectors is None or self._vectors[0] != version:
            rows = self.conn.execute("SELECT id, vector FROM passages WHERE vector IS NOT NULL ORDER BY id").fetchall()
            ids = np.array([r[0] for r in rows], np.int64)
            matrix = np.stack([np.frombuffer(r[1], np.float32) for r in rows]) if rows else np.zeros((0, 0), np.float32)
            self._vectors = (version, ids, matrix)
        return self._vectors[1], self._vectors[2]

    # keeping in step
    def sync(self, embedder=None, embedder_key: str = "", report=None, cancelled=None) -> SyncResult:
        """Index what changed under the roots (see the module's docstring). `embedder`: an object with
        `embed(texts) -> float32 [n, dim]` (None: BM25 only), named by `embedder_key` (a new key embeds every
        passage again). `report(dict)` hears {"phase": "reading" | "embedding", "done", "total", "name"};
        `cancelled()` is polled between files and batches (what is done stays done)."""
        report = report or (lambda _info: None)
        cancelled = cancelled or (lambda: False)
        result = SyncResult()
        wanted = self.files()
        known = {r["path"]: r for r in self.conn.execute("SELECT id, path, mtime, size, sha, error FROM documents")}
        for path in set(known) - set(wanted):
            self._drop(known[path]["id"])
            result.removed += 1
        self.conn.commit()
        if embedder_key != self.embedder_key():
            self.conn.execute("UPDATE passages SET vector = NULL")
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedder', ?)", (embedder_key,))
            self.conn.commit()
        for done, path in enumerate(wanted):
            if cancelled():
                result.cancelled = True
                return result
            report({"phase": "reading", "done": done, "total": len(wanted), "name": os.path.basename(path)})
            self._sync_file(path, known.get(path), result)
            self.conn.commit()
        report({"phase": "reading", "done": len(wanted), "total": len(wanted), "name": ""})
        if embedder is not None:
            self._embed_missing(embedder, report, cancelled, result)
        return result

    def _sync_file(self, path: str, row, result: SyncResult) -> None:
        try:
            st = os.stat(path)
            if row is not None and row["mtime"] == st.st_mtime and row["size"] == st.st_size:
                result.unchanged += 1
                return
            sha = file_sha(path)
        except OSError as e:
            result.errors.append(f"{os.path.basename(path)} cannot be read: {e.strerror or e}")
            return
        if row is not None and row["sha"] == sha and not row["error"]:
            self.conn.execute("UPDATE documents SET mtime = ?, size = ? WHERE id = ?", (st.st_mtime, st.st_size,
                                                                                      row["id"]))
            result.unchanged += 1
            return
        error, passages = "", []
        try:
            passages = split(read_document(path))
        except ReadError as e:
            error = str(e)
            result.errors.append(error)
        if row is not None:
            self._drop(row["id"])
        cur = self.conn.execute("INSERT INTO documents(path, mtime, size, sha, error) VALUES (?, ?, ?, ?, ?)",
                                (path, st.st_mtime, st.st_size, sha, error))
        for position, p in enumerate(passages):
            pid = self.conn.execute("INSERT INTO passages(doc_id, position, text, first_line, last_line, page) "
                                    "VALUES (?, ?, ?, ?, ?, ?)",
                                    (cur.lastrowid, position, p.text, p.first_line, p.last_line, p.page)).lastrowid
            self.conn.execute("INSERT INTO passages_fts(rowid, text) VALUES (?, ?)", (pid, p.text))
        if not error:
            if row is None:
                result.added += 1
            else:
                result.updated += 1

    def _drop(self, doc_id: int) -> None:
        self.conn.execute("DELETE FROM passages_fts WHERE rowid IN (SELECT id FROM passages WHERE doc_id = ?)",
                          (doc_id,))
        self.conn.execute("DELETE FROM documents WHERE id = ?", (doc_id,))

    def _embed_missing(self, embedder, report, cancelled, result: SyncResult) -> None:
        rows = self.conn.execute("SELECT id, text FROM passages WHERE vector IS NULL ORDER BY id").fetchall()
        for start in range(0, len(rows), EMBED_BATCH):
            if cancelled():
                result.cancelled = True
                return
            report({"phase": "embedding", "done": start, "total": len(rows), "name": ""})
            batch = rows[start:start + EMBED_BATCH]
            vectors = np.asarray(embedder.embed([r["text"] for r in batch]), np.float32)
            self.conn.executemany("UPDATE passages SET vector = ? WHERE id = ?",
                                  [(v.tobytes(), r["id"]) for v, r in zip(vectors, batch)])
            self.conn.commit()
            result.embedded += len(batch)
        report({"phase": "embedding", "done": len(rows), "total": len(rows), "name": ""})
