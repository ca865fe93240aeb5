"""Reading GGUF files, the format llama.cpp, LM Studio, Ollama and GPT4All run: a header, typed key-value metadata
(the architecture's hyperparameters, the tokenizer, the chat template), a table of tensors and their data, which
is memory-mapped and handed out as zero-copy views. Versions 2 and 3, little-endian (ggml/include/gguf.h).

Every field is checked before it is used: a short read, a string or array longer than the file, an unknown value or
tensor type, a shape that does not divide into blocks, an offset not aligned to `general.alignment` or data past the
end of the file is a `GGUFError` naming the file and the field, never an exception from deep inside.
"""
import mmap
import os
import struct
from dataclasses import dataclass

import numpy as np

from petit.formats.pages import close_map, release_rows

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_NAME = 64            # GGML_MAX_NAME: a tensor name is shorter
MAX_DIMS = 4

# value types (gguf.h): code -> (name, struct format or None for a string / array)
_SCALARS = {0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"), 4: ("uint32", "<I"),
            5: ("int32", "<i"), 6: ("float32", "<f"), 7: ("bool", "<?"), 10: ("uint64", "<Q"), 11: ("int64", "<q"),
            12: ("float64", "<d")}
STRING, ARRAY = 8, 9
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1", 10: "<u8", 11: "<i8",
          12: "<f8"}

# tensor types (ggml.h): code -> (name, values per block, bytes per block)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98), 19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110), 22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56), 30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
}


class GGUFError(ValueError):
    """A GGUF file is invalid or unsupported; the message names the file and what is wrong where."""


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of the table. `shape` is row-major (outermost first: [rows, cols] for a matrix), the reverse of
    GGUF's ne[]; `offset` counts from the start of the data section."""
    name: str
    type: str
    shape: tuple
    offset: int
    nbytes: int


class _Cursor:
    """Reads little-endian fields from a buffer, refusing to read past its end."""

    def __init__(self, buf, path: str):
        self.buf, self.pos, self.end, self.path = buf, 0, len(buf), path

    def fail(self, where: str, msg: str) -> GGUFError:
        return GGUFError(f"{self.path}: {where}: {msg}")

    def take(self, fmt: str, where: str):
        size = struct.calcsize(fmt)
        if self.pos + size > self.end:
            raise self.fail(where, f"the file ends at byte {self.end}, before this field (at {self.pos}) is complete")
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return v

    def string(self, where: str) -> str:
        n = self.take("<Q", where)
        if n > self.end - self.pos:
            raise self.fail(where, f"a string of {n} bytes is longer than the {self.end - self.pos} bytes left in "
                                   f"the file")
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(where, f"not valid UTF-8 ({e.reason} at byte {e.start})") from None

    def _strings(self, n: int, where: str) -> list:
        """n strings in a row (a vocabulary: 150,000 tokens and as many merges), without a message per string.

        The lengths are walked in C (a Python loop over 300,000 of them takes 0.3-0.6 s); the texts are one UTF-8
        decode of the bytes between them, cut where they start. That equals decoding each string alone when no
        string starts inside a character (checked): a string ending inside one would make the next start with a
        continuation byte. Anything wrong is read again string by string, for the message."""
        from petit import native
        first = self.pos
        try:
            at, pos = native.prefixed_starts(self.buf, first, n)
        except IndexError:
            return self._strings_one_by_one(n, where)
        if n == 0:
            return []
        at -= first                                          # where each text starts, from the first length
        region = np.frombuffer(self.buf, np.uint8, pos - first, first)
        keep = np.ones(len(region), bool)
        keep[(at[:, None] - 8 + np.arange(8)).ravel()] = False
        data = region[keep]
        sizes = np.diff(np.append(at, pos - first + 8)) - 8
        begin = np.concatenate(([0], np.cumsum(sizes)[:-1]))  # where each text starts in data
        try:
            text = data.tobytes().decode("utf-8")
        except UnicodeDecodeError:
            return self._strings_one_by_one(n, where)
        if len(text) != len(data):                           # not all ASCII: bytes to characters
            lead = (data & 0xC0) != 0x80
            if not lead[begin[sizes > 0]].all():
                return self._strings_one_by_one(n, where)
            chars = np.concatenate(([0], np.cumsum(lead)))
            begin, stop = chars[begin], chars[begin + sizes]
        else:
            stop = begin + sizes
        self.pos = pos
        return [text[a:b] for a, b in zip(begin.tolist(), stop.tolist())]

    def _strings_one_by_one(self, n: int, where: str) -> list:
        buf, pos, end, out = self.buf, self.pos, self.end, []
        unpack, append = struct.Struct("<Q").unpack_from, out.append
        start = pos
        try:
            for _ in range(n):
                start = pos
                (size,) = unpack(buf, pos)
                pos += 8
                if size > end - pos:
                    raise IndexError(size)
                append(buf[pos:pos + size].decode("utf-8"))
                pos += size
        except (IndexError, struct.error, UnicodeDecodeError):
            self.pos = start
            self.string(f"{where}[{len(out)}]")     # the same string again, for its message (it raises)
            raise
        self.pos = pos
        return out

    def value(self, vtype: int, where: str):
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype][1], where)
        if vtype == STRING:
            return self.string(where)
        if vtype == ARRAY:
            etype = self.take("<I", where + " (array element type)")
            n = self.take("<Q", where + " (array length)")
            if etype == ARRAY:
                raise self.fail(where, "an array of arrays is not a GGUF value")
            if etype in _NUMPY:            # numbers: one read, a NumPy array (token scores, types ...)
                size = n * struct.calcsize(_SCALARS[etype][1])
                if size > self.end - self.pos:
                    raise self.fail(where, f"an array of {n} {_SCALARS[etype][0]} values ({size} bytes) is longer "
                                           f"than the {self.end - self.pos} bytes left in the file")
                a = np.frombuffer(self.buf, _NUMPY[etype], n, self.pos).copy()
                self.pos += size
                return a.astype(bool) if etype == 7 else a
            if etype != STRING:
                raise self.fail(where, f"unknown array element type {etype}")
            if n > (self.end - self.pos) // 8:     # every string takes at least its 8-byte length
                raise self.fail(where, f"an array of {n} strings cannot fit in the {self.end - self.pos} bytes "
                                       f"left in the file")
            return self._strings(n, where)
        raise self.fail(where, f"unknown value type {vtype}")


class GGUFFile:
    """A memory-mapped, validated GGUF file.

    Attributes:
        path: the path as given. version: 2 or 3. alignment: of the tensor data (general.alignment, default 32).
        metadata: key -> value (int, float, bool, str; arrays of numbers as NumPy arrays, of strings as lists).
        tensors: name -> GGUFTensor, in file order.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._mm = None
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < 24:
                    raise GGUFError(f"{self.path}: header: the file is {size} bytes, shorter than a GGUF header")
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            raise GGUFError(f"{self.path}: file not found") from None
        except OSError as e:
            raise GGUFError(f"{self.path}: cannot open: {e.strerror or e}") from None
        try:
            self._parse(size)
        except BaseException:
            self.close()
            raise

    def _parse(self, size: int) -> None:
        c = _Cursor(self._mm, self.path)
        magic = bytes(self._mm[:4])
        if magic != MAGIC:
            raise c.fail("magic", f"expected GGUF, found {magic!r}")
        c.pos = 4
        version = c.take("<I", "version")
        if version and version & 0xFFFF == 0:
            raise c.fail("version", f"{version:#x} reads as a big-endian file ({version >> 24} byte-swapped): "
                                    f"only little-endian GGUF files are supported")
        if version not in VERSIONS:
            raise c.fail("version", f"GGUF version {version} is not supported (versions 2 and 3 are)")
        self.version = version
        n_tensors = c.take("<Q", "tensor count")
        n_kv = c.take("<Q", "metadata count")
        if n_kv > size // 13 or n_tensors > size // 25:      # each entry takes at least that many bytes
            raise c.fail("header", f"{n_kv} metadata entries and {n_tensors} tensors cannot fit in {size} bytes")
        self.metadata = {}
        for i in range(n_kv):
            key = c.string(f"metadata entry {i} (key)")
            if not key:
                raise c.fail(f"metadata entry {i}", "the key is empty")
            if key in self.metadata:
                raise c.fail(f"metadata {key!r}", "the key appears twice")
            self.metadata[key] = c.value(c.take("<I", f"metadata {key!r} (type)"), f"metadata {key!r}")
        alignment = self.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0 \
                or alignment & (alignment - 1):
            raise c.fail("metadata 'general.alignment'", f"{alignment!r} is not a power of two")
        self.alignment = alignment
        infos = []
        for i in range(n_tensors):
            name = c.string(f"tensor {i} (name)")
            where = f"tensor {name!r}"
            if not name or len(name.encode()) >= MAX_NAME:
                raise c.fail(where, f"a name must have 1 to {MAX_NAME - 1} bytes")
            n_dims = c.take("<I", where + " (dimensions)")
            if not 1 <= n_dims <= MAX_DIMS:
                raise c.fail(where, f"{n_dims} dimensions (1 to {MAX_DIMS} are allowed)")
            ne = [c.take("<Q", f"{where} (dimension {d})") for d in range(n_dims)]
            code = c.take("<I", where + " (type)")
            offset = c.take("<Q", where + " (offset)")
            infos.append((name, ne, code, offset, where))
        data_start = -(-c.pos // alignment) * alignment
        data_size = size - data_start
        self.tensors = {}
        for name, ne, code, offset, where in infos:
            if name in self.tensors:
                raise c.fail(where, "the name appears twice")
            if code not in GGML_TYPES:
                raise c.fail(where, f"unknown tensor type {code}")
            tname, block, block_bytes = GGML_TYPES[code]
            if ne[0] % block:
                raise c.fail(where, f"a row of {ne[0]} values does not divide into {tname} blocks of {block}")
            count = 1
            for n in ne:
                count *= n
            if count >= 1 << 62:
                raise c.fail(where, f"shape {tuple(reversed(ne))} is too large")
            nbytes = count // block * block_bytes
            if offset % alignment:
                raise c.fail(where, f"offset {offset} is not a multiple of the alignment {alignment}")
            if offset + nbytes > data_size:
                raise c.fail(where, f"its {nbytes} bytes at offset {offset} of the data section run past the end of "
                                    f"the file (the data section holds {max(data_size, 0)} bytes)")
            self.tensors[name] = GGUFTensor(name, tname, tuple(int(n) for n in reversed(ne)), offset, nbytes)
        self._data_start = data_start

    def raw(self, name: str) -> np.ndarray:
        """A zero-copy, read-only uint8 view of tensor `name`'s bytes."""
        t = self.tensors.get(name)
        if t is None:
            raise GGUFError(f"{self.path}: tensor {name!r}: no such tensor")
        if self._mm is None:
            raise GGUFError(f"{self.path}: tensor {name!r}: the file is closed")
        return np.frombuffer(self._mm, np.uint8, t.nbytes, self._data_start + t.offset)

    def release(self, name: str, rows: tuple[int, int] | None = None, n_rows: int | None = None) -> None:
        """Tell the kernel this process is done with tensor `name`'s pages for now, or with those of its rows
        [r0, r1) of `n_rows` (default: its outer rows) (MADV_DONTNEED): they leave the resident set, the page cache
        keeps them, and reading them again maps them back in. A no-op where unsupported."""
        t = self.tensors.get(name)
        if t is not None:
            begin = self._data_start + t.offset
            release_rows(self._mm, begin, begin + t.nbytes, n_rows or t.shape[0], rows)

    def get(self, key: str, default=None):
        return self.metadata.get(key, default)

    def close(self) -> None:
        """Unmap the file (once no views are alive; else when they are collected). Idempotent."""
        close_map(self._mm)
        self._mm = None

    def __enter__(self) -> "GGUFFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def is_gguf(path) -> bool:
    """Whether the file starts with GGUF's magic (False for a folder or an unreadable file)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


# ---- writing ----
_TYPE_OF_NUMPY = {np.dtype(v): k for k, v in _NUMPY.items() if k != 7}
_CODE_OF_TYPE = {name: code for code, (name, _, _) in GGML_TYPES.items()}


def _pack_value(v, where: str) -> bytes:
    """GGUF's type code and bytes of a metadata value: bool, int (uint32 when it fits, else int64), float (float32),
    str, NumPy scalars and arrays in their own type, lists of str, int or float."""
    if isinstance(v, (bool, np.bool_)):
        return struct.pack("<I?", 7, bool(v))
    if isinstance(v, np.generic) and np.dtype(v.dtype) in _TYPE_OF_NUMPY:
        code = _TYPE_OF_NUMPY[np.dtype(v.dtype)]
        return struct.pack("<I", code) + struct.pack(_SCALARS[code][1], v.item())
    if isinstance(v, int):
        return struct.pack("<II", 4, v) if 0 <= v < 1 << 32 else struct.pack("<Iq", 11, v)
    if isinstance(v, float):
        return struct.pack("<If", 6, v)
    if isinstance(v, str):
        raw = v.encode("utf-8")
        return struct.pack("<IQ", STRING, len(raw)) + raw
    if isinstance(v, np.ndarray) and v.ndim == 1 and (v.dtype == bool or np.dtype(v.dtype) in _TYPE_OF_NUMPY):
        code = 7 if v.dtype == bool else _TYPE_OF_NUMPY[np.dtype(v.dtype)]
        return struct.pack("<IIQ", ARRAY, code, v.size) + np.ascontiguousarray(v, _NUMPY[code]).tobytes()
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, str) for x in v):
            return struct.pack("<IIQ", ARRAY, STRING, len(v)) + b"".join(
                struct.pack("<Q", len(b)) + b for b in (x.encode("utf-8") for x in v))
        if all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return _pack_value(np.asarray(v, np.int32), where)
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
            return _pack_value(np.asarray(v, np.float32), where)
    raise GGUFError(f"{where}: cannot store a value of type {type(v).__name__} in GGUF metadata")


def write_gguf(path, metadata: dict, tensors: dict, alignment: int = DEFAULT_ALIGNMENT) -> None:
    """Write a GGUF v3 file atomically (to a temporary name, then renamed over `path`).

    Args:
        metadata: key -> value (see _pack_value for the types; general.alignment is written when not 32).
        tensors: name -> (GGUF type name, row-major shape, bytes-like data of exactly that tensor's size), in order.

    Raises:
        GGUFError: a bad type, shape, size or value, naming it; OSError: the file cannot be written.
    """
    path = os.fspath(path)
    meta = dict(metadata)
    if alignment != DEFAULT_ALIGNMENT:
        meta["general.alignment"] = np.uint32(alignment)
    head = [struct.pack("<4sIQQ", MAGIC, 3, len(tensors), len(meta))]
    for key, value in meta.items():
        raw = key.encode("utf-8")
        head.append(struct.pack("<Q", len(raw)) + raw + _pack_value(value, f"{path}: metadata {key!r}"))
    blobs, offset = [], 0
    for name, (tname, shape, data) in tensors.items():
        where = f"{path}: tensor {name!r}"
        if tname not in _CODE_OF_TYPE:
            raise GGUFError(f"{where}: unknown tensor type {tname!r}")
        _, block, block_bytes = GGML_TYPES[_CODE_OF_TYPE[tname]]
        shape = tuple(int(n) for n in shape)
        if not 1 <= len(shape) <= MAX_DIMS or shape[-1] % block:
            raise GGUFError(f"{where}: shape {shape} does not suit {tname} (rows of whole blocks of {block})")
        count = 1
        for n in shape:
            count *= n
        view = memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        if view.nbytes != count // block * block_bytes:
            raise GGUFError(f"{where}: {view.nbytes} bytes, a {tname} tensor of shape {shape} has "
                            f"{count // block * block_bytes}")
        raw = name.encode("utf-8")
        head.append(struct.pack("<Q", len(raw)) + raw + struct.pack("<I", len(shape))
                    + struct.pack(f"<{len(shape)}Q", *reversed(shape))
                    + struct.pack("<IQ", _CODE_OF_TYPE[tname], offset))
        blobs.append((offset, view))
        offset = -(-(offset + view.nbytes) // alignment) * alignment
    header = b"".join(head)
    pad = -len(header) % alignment
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(header + bytes(pad))
            pos = 0
            for at, view in blobs:
                f.write(bytes(at - pos))
                f.write(view)
                pos = at + view.nbytes
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
