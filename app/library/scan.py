"""The library scan, the work a Worker thread (app.threads) runs: find the candidates, describe each one that changed
since the last scan (headers only), and report the folders visited so the window can watch them."""
from dataclasses import dataclass

from app.library.entries import Entry, read_entry, stamp_of
from app.library.locations import candidates


@dataclass
class ScanResult:
    entries: list[Entry]
    folders: list[str]            # every folder visited: watched for new, removed or changed files


def scan(folders: list[str], stores: list[tuple[str, str]], known: dict | None = None, report=None,
         cancelled=lambda: False) -> ScanResult:
    """Describe every model of `folders` and `stores`; `known` (path -> Entry of the last scan) spares re-reading a
    file whose modification time and size have not changed."""
    known = known or {}
    visited: list[str] = []
    entries = []
    for c in candidates(folders, stores, visited):
        if cancelled():
            break
        old = known.get(c.path)
        if old is not None and not c.problem and old.stamp and old.stamp == stamp_of(c.path):
            entries.append(Entry(**{**old.__dict__, "name": c.name, "source": c.source}))
        else:
            entries.append(read_entry(c))
    return ScanResult(entries, sorted(set(visited)))
