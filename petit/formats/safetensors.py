"""Reader for `.safetensors` files, without the `safetensors` package.

Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}`, then the data buffer;
offsets are relative to the start of the buffer (byte 8 + N). `SafetensorsFile` memory-maps the file, validates
the whole header up front and hands out zero-copy, read-only numpy views of the tensors.
"""

import json
import os
from dataclasses import dataclass

import numpy as np

from petit.formats.pages import release_rows

from petit.formats.pages import close_map
from petit.formats.tensor_file import TensorFile

MAX_HEADER_SIZE = 100_000_000  # the same cap the reference implementation uses

# safetensors dtype -> (Petit dtype name, little-endian numpy dtype of the view; bf16 is viewed as uint16)
DTYPES = {
    "F32": ("f32", np.dtype("<f4")),
    "F16": ("f16", np.dtype("<f2")),
    "BF16": ("bf16", np.dtype("<u2")),
    "F64": ("f64", np.dtype("<f8")),
    "I64": ("i64", np.dtype("<i8")),
    "I32": ("i32", np.dtype("<i4")),
    "I16": ("i16", np.dtype("<i2")),
    "I8": ("i8", np.dtype("i1")),
    "U8": ("u8", np.dtype("u1")),
    "BOOL": ("bool", np.dtype("?")),
}


class SafetensorsError(ValueError):
    """A `.safetensors` file is missing or invalid; the message names the file (and the tensor, if any)."""


@dataclass(frozen=True)
class SafetensorsEntry:
    """One validated header entry; `begin`/`end` are absolute byte offsets into the file."""

    name: str
    dtype: str  # Petit name: "f32", "bf16", ...
    shape: tuple[int, ...]
    begin: int
    end: int
    view_dtype: np.dtype  # little-endian numpy dtype of `raw()`


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


class SafetensorsFile(TensorFile):
    """A memory-mapped, fully validated `.safetensors` file.

    Attributes:
        path: The path as given (used in every error message).
        metadata: The `__metadata__` object of the header ({} when absent).
        entries: name -> SafetensorsEntry, in header order.

    Views returned by `raw()` point into the mapping; `close()` unmaps once no view is alive (if views are still
    referenced, the mapping is freed when they are garbage collected).
    """

    Error = SafetensorsError

    def __init__(self, path):
        """Open, memory-map and validate `path`.

        Guarantees: after a successful return every entry has a known dtype, a valid shape, and a byte range
        inside the data buffer, of exactly dtype size x element count bytes, overlapping no other tensor.

        Raises:
            SafetensorsError: The file is missing, unreadable, or fails any of those checks.
        """
        self.path = os.fspath(path)
        self._mm = None
        def check(size):
            if size < 8:
                raise self._err(f"file is {size} bytes, shorter than the 8-byte header length "
                                f"(truncated or not a safetensors file)")
        size, _ = self._map(check)
        try:
            self._validate(size)
        except BaseException:
            self.close()
            raise

    def _validate(self, size: int) -> None:
        n = int.from_bytes(self._mm[:8], "little")
        if n > MAX_HEADER_SIZE:
            raise self._err(f"header length {n} is larger than the {MAX_HEADER_SIZE}-byte limit "
                            f"(corrupt or not a safetensors file)")
        if 8 + n > size:
            raise self._err(f"header length {n} runs past the end of the file ({size} bytes; truncated or not a "
                            f"safetensors file)")
        try:
            header = json.loads(self._mm[8:8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates,
                                parse_constant=_reject_constant)
        except UnicodeDecodeError as e:
            raise self._err(f"header is not valid UTF-8 ({e.reason} at byte {e.start})") from None
        except (ValueError, RecursionError) as e:
            raise self._err(f"header is not valid JSON ({e})") from None
        if not isinstance(header, dict):
            raise self._err(f"header must be a JSON object, found {type(header).__name__}")
        metadata = header.pop("__metadata__", {})
        if not isinstance(metadata, dict):
            raise self._err(f"__metadata__ must be a JSON object, found {type(metadata).__name__}")
        self.metadata = metadata
        start, buffer_len = 8 + n, size - 8 - n
        self.entries = {name: self._entry(name, spec, start, buffer_len) for name, spec in header.items()}
        prev = None
        for e in sorted((e for e in self.entries.values() if e.end > e.begin), key=lambda e: (e.begin, e.end)):
            if prev is not None and e.begin < prev.end:
                raise self._err(f"data_offsets [{e.begin - start}, {e.end - start}] overlap those of tensor "
                                f"{prev.name!r} [{prev.begin - start}, {prev.end - start}]", e.name)
            prev = e

    def _entry(self, name: str, spec, start: int, buffer_len: int) -> SafetensorsEntry:
        if not isinstance(spec, dict):
            raise self._err(f"header entry must be a JSON object, found {type(spec).__name__}", name)
        missing = [k for k in ("dtype", "shape", "data_offsets") if k not in spec]
        if missing:
            raise self._err(f"header entry lacks {', '.join(missing)}", name)
        st_dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
        if st_dtype not in DTYPES:
            raise self._err(f"unsupported dtype {st_dtype!r} (supported: {', '.join(DTYPES)})", name)
        dtype, np_dtype = DTYPES[st_dtype]
        if not isinstance(shape, list) or any(type(d) is not int or d < 0 for d in shape):
            raise self._err(f"shape {shape!r} must be a list of non-negative integers", name)
        if (not isinstance(offsets, list) or len(offsets) != 2
                or any(type(o) is not int or o < 0 for o in offsets)):
            raise self._err(f"data_offsets {offsets!r} must be [begin, end] with non-negative integers", name)
        begin, end = offsets
        if begin > end or end > buffer_len:
            raise self._err(f"data_offsets [{begin}, {end}] are out of range of the {buffer_len}-byte data buffer",
                            name)
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * np_dtype.itemsize:
            raise self._err(f"data_offsets [{begin}, {end}] hold {end - begin} bytes, but dtype {st_dtype} and "
                            f"shape {tuple(shape)} need {count * np_dtype.itemsize}", name)
        return SafetensorsEntry(name, dtype, tuple(shape), start + begin, start + end, np_dtype)

    def raw(self, name: str) -> np.ndarray:
        """Return a zero-copy, read-only view of `name` with its dtype (bf16 as uint16) and shape.

        Data is little-endian; on a big-endian machine the result is a byte-swapped (native order) copy instead.

        Raises:
            SafetensorsError: No tensor `name`, or the file is closed.
        """
        e = self._get(name)
        if self._mm is None:
            raise self._err("file is closed", name)
        count = (e.end - e.begin) // e.view_dtype.itemsize
        view = np.frombuffer(self._mm, e.view_dtype, count, e.begin).reshape(e.shape)
        if not e.view_dtype.isnative:
            view = view.astype(e.view_dtype.newbyteorder("="))
            view.flags.writeable = False
        return view

    def release(self, name: str, rows: tuple[int, int] | None = None) -> None:
        """Tell the kernel this process is done with `name`'s pages (MADV_DONTNEED), or with those of its outer rows
        [r0, r1): they leave the resident set (the page cache keeps them). Reading them again maps them back in. A
        no-op where unsupported."""
        e = self._get(name)
        release_rows(self._mm, e.begin, e.end, e.shape[0] if e.shape else 1, rows if e.shape else None)

    def close(self) -> None:
        """Release the memory map. Idempotent; never raises if views are still alive (see class doc)."""
        close_map(self._mm)
        self._mm = None
