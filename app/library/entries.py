"""One row of the model library, read from a model's headers (petit.describe: no weights are loaded), and whether
it fits in this machine's memory: the weights, plus the KV cache at the context the user chose for it, plus 10 %,
against the memory available now."""
import os
from dataclasses import dataclass, field

import petit
from app.library.locations import Candidate
from app.models.memory import MemoryInfo, human_bytes

HEADROOM = 1.10
KV_BYTES = {"int8": 1, "f32": 4}           # per value, as the engine's caches keep them


@dataclass
class Entry:
    path: str
    name: str
    source: str
    family: str = ""
    parameters: int = 0
    weight_type: str = ""
    file_size: int = 0
    context_length: int | None = None
    layers: int | None = None
    kv_width: int | None = None
    problem: str = ""                     # why it cannot be opened or run ("" = it runs)
    readable: bool = True                 # False: the file itself could not be read
    stamp: tuple = field(default=(), compare=False)   # (mtime, size) it was read at

    @property
    def usable(self) -> bool:
        return self.readable and not self.problem


def stamp_of(path: str) -> tuple:
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_mtime_ns, st.st_size)


def main_weight_type(types: dict) -> str:
    """The tensor type holding the most bytes (q8_0, Q4_K, f16...)."""
    if not types:
        return ""
    return max(types.items(), key=lambda kv: kv[1][1])[0]


def read_entry(c: Candidate) -> Entry:
    """Describe one candidate; a file that cannot be read becomes an entry that says why."""
    if c.problem:
        return Entry(c.path, c.name, c.source, problem=c.problem, readable=False)
    try:
        d = petit.describe(c.path)
    except Exception as e:               # ValueError, OSError, or a header the reader trips on: shown, not hidden
        text = str(e) or type(e).__name__
        return Entry(c.path, c.name, c.source, problem=text, readable=False, stamp=stamp_of(c.path),
                     file_size=_size(c.path))
    return Entry(c.path, c.name, c.source, family=d.get("architecture") or "", parameters=d.get("parameters") or 0,
                 weight_type=main_weight_type(d.get("types") or {}), file_size=d.get("file_size") or 0,
                 context_length=d.get("context_length"), layers=d.get("layers"), kv_width=d.get("kv_width"),
                 problem=d.get("runs") or "", stamp=stamp_of(c.path))


def _size(path: str) -> int:
    try:
        return os.path.getsize(path) if os.path.isfile(path) else 0
    except OSError:
        return 0


def kv_bytes(e: Entry, n_ctx: int, kv_type: str | None = None) -> int:
    """The KV cache at n_ctx positions (K and V of every layer); 0 when the model does not say its shape."""
    if not (e.layers and e.kv_width):
        return 0
    if kv_type is None:
        kv_type = "int8" if e.weight_type.lower().startswith("q") else "f32"
    return 2 * e.layers * e.kv_width * n_ctx * KV_BYTES.get(kv_type, 4)


def memory_need(e: Entry, n_ctx: int, kv_type: str | None = None) -> int:
    return int((e.file_size + kv_bytes(e, n_ctx, kv_type)) * HEADROOM)


def fit_text(e: Entry, n_ctx: int, mem: MemoryInfo, kv_type: str | None = None) -> tuple[str, bool | None]:
    """('fits: needs 1.2 GB of 7.5 GB available', True); None when the available memory is unknown."""
    need = memory_need(e, n_ctx, kv_type)
    detail = f"needs {human_bytes(need)} at context {n_ctx}"
    if mem.available is None:
        return f"{detail}; available memory unknown", None
    if need <= mem.available:
        return f"fits: {detail}, {human_bytes(mem.available)} available", True
    return f"too big: {detail}, {human_bytes(mem.available)} available", False
