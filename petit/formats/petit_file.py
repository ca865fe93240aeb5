"""Reader and writer for `.petit` model files (format version 1, see docs/petit-format.md).

A `.petit` file is a 64-byte header, a JSON metadata block, a tensor table and 64-byte aligned tensor data.
`PetitFile` memory-maps the file and hands out zero-copy, read-only numpy views of the tensors;
`write_petit` validates everything first, records a checksum of every tensor in the metadata, then writes
atomically (temporary file + fsync + rename). `PetitFile.check_checksums` holds the tensors to those checksums.
"""

import errno
import itertools
import json
import mmap
import os
import struct
from dataclasses import dataclass

import numpy as np

from petit.formats.pages import close_map, release_rows
from petit.native import anonymous_map

MAGIC = b"PETIT\0\0\0"
VERSION = 1
ALIGNMENT = 64
DTYPE_CODES = {"f32": 0, "f16": 1, "bf16": 2, "q8_0": 3, "q4_0": 4, "q5_0": 5, "q4_k": 6, "q5_k": 7, "q6_k": 8,
               "tq2": 9}
# block types: values per block, bytes per block (GGML's layouts: docs/petit-format.md)
BLOCKS = {"q8_0": (32, 34), "q4_0": (32, 18), "q5_0": (32, 22), "q4_k": (256, 144), "q5_k": (256, 176),
          "q6_k": (256, 210)}
# block types with a header per row (tq2: one float32 scale, then 8-byte blocks of 32 ternary values)
ROW_HEADERS = {"tq2": 4}
BLOCKS["tq2"] = (32, 8)
MAX_NAME_LEN = 1024
MAX_NDIM = 4

# magic, version, alignment, meta_size, n_tensors, table_offset, data_offset, file_size, reserved
_HEADER = struct.Struct("<8sIIQQQQQQ")
HEADER_SIZE = _HEADER.size  # 64
_CODE_DTYPES = {code: name for name, code in DTYPE_CODES.items()}
_ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
_VIEW_DTYPES = {"f32": np.dtype("<f4"), "f16": np.dtype("<f2"), "bf16": np.dtype("<u2")}
_MIN_ENTRY = 4 + 1 + 4 + 4 + 8 + 8 + 8  # smallest possible table entry (1-byte name, 1-D)
_tmp_counter = itertools.count()


def _read_private(f, size: int):
    """The whole file in private anonymous memory (huge pages advised before it is touched), or an OSError."""
    mm = anonymous_map(size)
    view = memoryview(mm)
    try:
        done = 0
        while done < size:
            n = f.readinto(view[done:])
            if not n:
                raise OSError(f"the file ended after {done} of {size} bytes while it was read")
            done += n
    except BaseException:
        view.release()
        mm.close()
        raise
    view.release()
    return mm


class PetitFileError(ValueError):
    """A `.petit` file (or data about to be written to one) is invalid; the message names file and field."""


class PetitWriteError(OSError):
    """A `.petit` file could not be written. str() is "cannot write PATH: why", naming the path as given;
    `strerror` is the why, `filename` the path."""

    def __init__(self, path: str, why: str, code: int | None = None):
        super().__init__(code, why, path)

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


def check_output_folder(path) -> None:
    """Raise PetitWriteError ("cannot write PATH: folder F does not exist") unless the folder `path` goes into
    exists: a writer that reads a whole model first checks this before, not after."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise PetitWriteError(path, f"folder {folder} does not exist" if not os.path.exists(folder)
                              else f"{folder} is not a folder", errno.ENOENT)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor table entry; `offset` is relative to the file's `data_offset`."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def tensor_nbytes(dtype: str, shape) -> int:
    """Return the byte size of a tensor stored as `dtype` with `shape`.

    Args:
        dtype: One of the names in `DTYPE_CODES`.
        shape: Sequence of positive ints, outermost first.

    Returns:
        The exact number of data bytes.

    Raises:
        ValueError: Unknown dtype, empty shape, a dimension below 1, or (for a block type) a last
            dimension that is not a multiple of its block (32 values; 256 for q4_k, q5_k, q6_k). The message
            names the dtype and shape.
    """
    if dtype not in DTYPE_CODES:
        raise ValueError(f"unknown dtype {dtype!r} (expected one of {', '.join(DTYPE_CODES)})")
    shape = tuple(int(d) if isinstance(d, np.integer) else d for d in shape)
    if not shape or any(type(d) is not int or d < 1 for d in shape):
        raise ValueError(f"shape {shape} must be a non-empty sequence of positive ints")
    n = 1
    for d in shape:
        n *= d
    if dtype in BLOCKS:
        size, nb = BLOCKS[dtype]
        if shape[-1] % size:
            raise ValueError(f"shape {shape}: last dimension {shape[-1]} is not a multiple of {size} "
                             f"as dtype {dtype} requires")
        return n // size * nb + n // shape[-1] * ROW_HEADERS.get(dtype, 0)
    return n * _ELEM_BYTES[dtype]


def _tensor_bytes(where: str, dtype: str, shape: tuple, data, nbytes: int) -> memoryview:
    """Return `data` as a flat byte memoryview after checking its type, shape and size."""
    if isinstance(data, np.ndarray):
        typed = _VIEW_DTYPES.get(dtype)
        if typed is not None and data.dtype.type is typed.type:  # float32 / float16 / uint16 (any byte order)
            if tuple(data.shape) != shape:
                raise PetitFileError(f"{where}: array shape {tuple(data.shape)} does not match shape {shape}")
            data = np.ascontiguousarray(data, dtype=typed)
        elif data.dtype == np.uint8:  # raw stored bytes, any shape
            data = np.ascontiguousarray(data)
        else:
            want = f"{typed.name} or uint8" if typed is not None else "uint8"
            raise PetitFileError(f"{where}: array dtype {data.dtype} cannot hold {dtype} data (use {want})")
        view = memoryview(data.reshape(-1).view(np.uint8))
    else:
        try:
            view = memoryview(data).cast("B")
        except TypeError as e:
            raise PetitFileError(f"{where}: data must be a numpy array or contiguous bytes-like object, "
                                 f"not {type(data).__name__} ({e})") from None
    if view.nbytes != nbytes:
        raise PetitFileError(f"{where}: data has {view.nbytes} bytes, expected {nbytes} "
                             f"for dtype {dtype} and shape {shape}")
    return view


def checksum_hex(data) -> str:
    """The "pt64" checksum of a tensor's stored bytes as 16 hex digits (docs/petit-format.md)."""
    from petit.native import checksum
    return f"{checksum(data):016x}"


def write_petit(path, metadata: dict, tensors: dict, checksums: bool = True) -> None:
    """Write a `.petit` file atomically.

    Everything is validated before a byte is written. The file is written to `<path>.tmp-<pid>-<n>` in the
    same directory, fsynced and renamed over `path`; on any error the temporary file is removed and an
    existing `path` is left untouched.

    Args:
        path: Destination file path.
        metadata: JSON-serializable dict (strict JSON: no NaN/Infinity); stored as UTF-8 JSON.
        tensors: Mapping name -> (dtype, shape, data), written in insertion order. `data` is a numpy array
            or bytes-like object of exactly `tensor_nbytes(dtype, shape)` bytes: for f32/f16 a float32/float16
            array of that shape, for bf16 a uint16 array of that shape; raw uint8 arrays or bytes work for all; or
            a function returning such data, called once (a loaded model's repacked matrix gives its plain bytes).
        checksums: record the pt64 checksum of every tensor as written in metadata["checksums"]["pt64"]
            (replacing any given there), which loading checks. False writes the metadata as given (a file as
            older writers made it, for tests).

    Raises:
        PetitFileError: Invalid metadata, name, dtype, shape or data; the message names file and field.
        OSError: The file could not be written; the message names `path` (never the temporary name).
    """
    path = os.fspath(path)
    if not isinstance(tensors, dict):
        raise PetitFileError(f"{path}: tensors must be a dict, not {type(tensors).__name__}")
    if not isinstance(metadata, dict):
        raise PetitFileError(f"{path}: metadata must be a dict, not {type(metadata).__name__}")
    table, blobs, data_end = bytearray(), [], 0
    for name, spec in tensors.items():
        if not isinstance(name, str):
            raise PetitFileError(f"{path}: tensor name {name!r} must be a str")
        where = f"{path}: tensor {name!r}"
        try:
            raw_name = name.encode("utf-8")
        except UnicodeEncodeError:
            raise PetitFileError(f"{where}: name is not encodable as UTF-8") from None
        if not 1 <= len(raw_name) <= MAX_NAME_LEN:
            raise PetitFileError(f"{where}: name_len {len(raw_name)} is not in 1..{MAX_NAME_LEN}")
        try:
            dtype, shape, data = spec
        except (TypeError, ValueError):
            raise PetitFileError(f"{where}: value must be a (dtype, shape, data) tuple") from None
        if dtype not in DTYPE_CODES:
            raise PetitFileError(f"{where}: unknown dtype {dtype!r} (expected one of {', '.join(DTYPE_CODES)})")
        try:
            shape = tuple(int(d) if isinstance(d, np.integer) else d for d in shape)
        except TypeError:
            raise PetitFileError(f"{where}: shape {shape!r} is not a sequence") from None
        if not 1 <= len(shape) <= MAX_NDIM:
            raise PetitFileError(f"{where}: ndim {len(shape)} of shape {shape} is not in 1..{MAX_NDIM}")
        try:
            nbytes = tensor_nbytes(dtype, shape)
        except ValueError as e:
            raise PetitFileError(f"{where}: {e}") from None
        offset = _align(data_end)
        blobs.append((offset, _tensor_bytes(where, dtype, shape, data() if callable(data) else data, nbytes)))
        data_end = offset + nbytes
        table += struct.pack(f"<I{len(raw_name)}sII{len(shape)}QQQ", len(raw_name), raw_name,
                             DTYPE_CODES[dtype], len(shape), *shape, offset, nbytes)
    if checksums:
        recorded = metadata.get("checksums")
        recorded = dict(recorded) if isinstance(recorded, dict) else {}
        recorded["pt64"] = {name: checksum_hex(blob) for name, (_, blob) in zip(tensors, blobs)}
        metadata = dict(metadata, checksums=recorded)
    try:
        meta = json.dumps(metadata, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as e:
        raise PetitFileError(f"{path}: metadata is not JSON-serializable: {e}") from None
    table_offset = HEADER_SIZE + len(meta)
    data_offset = _align(table_offset + len(table))
    file_size = data_offset + data_end
    header = _HEADER.pack(MAGIC, VERSION, ALIGNMENT, len(meta), len(blobs), table_offset, data_offset,
                          file_size, 0)
    check_output_folder(path)
    tmp = f"{path}.tmp-{os.getpid()}-{next(_tmp_counter)}"
    try:
        with open(tmp, "wb") as f:
            f.write(header + meta + table + bytes(data_offset - table_offset - len(table)))
            pos = 0
            for offset, blob in blobs:
                f.write(bytes(offset - pos))
                f.write(blob)
                pos = offset + blob.nbytes
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):          # the user knows the path they gave, not our temporary name
            raise PetitWriteError(path, e.strerror or str(e), e.errno) from None
        raise
    try:  # make the rename itself durable (POSIX); harmless to skip where unsupported
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


class PetitFile:
    """A memory-mapped, fully validated `.petit` file.

    Attributes:
        path: The path as given (used in error messages).
        metadata: The decoded JSON metadata object.
        tensors: name -> TensorInfo, in file order.

    Views returned by `raw()` / `array()` point into the mapping. `close()` unmaps the file only once no
    views are alive; if some are still referenced the mapping is released when they are garbage collected.
    """

    def __init__(self, path, map_file: bool = True):
        """Open, memory-map and validate `path`.

        map_file=False reads the file into private memory instead, advised for huge pages (2 MiB pages where the
        system has transparent huge pages): a decode step streams every weight once, and from 4 KiB pages of the
        page cache it measured about 15 % slower. The file is then neither mapped nor held open.

        Raises:
            PetitFileError: The file is missing, unreadable or fails any check of the format spec.
        """
        self.path = os.fspath(path)
        self._mm = None
        self.mapped = map_file      # the views point into the file's pages (else into private memory)
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < HEADER_SIZE:
                    raise self._err("header", f"file is {size} bytes, shorter than the {HEADER_SIZE}-byte header")
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if map_file else _read_private(f, size)
        except FileNotFoundError:
            raise self._err(None, "file not found") from None
        except OSError as e:
            raise self._err(None, f"cannot open: {e.strerror or e}") from None
        try:
            self._validate(size)
        except BaseException:
            self.close()
            raise

    def _err(self, field, msg) -> PetitFileError:
        return PetitFileError(f"{self.path}: {field}: {msg}" if field else f"{self.path}: {msg}")

    def _validate(self, size: int) -> None:
        mm = self._mm
        (magic, version, alignment, meta_size, n_tensors, table_offset, data_offset, file_size,
         _reserved) = _HEADER.unpack_from(mm, 0)  # reserved: written as zero, ignored when read
        if magic != MAGIC:
            raise self._err("magic", f"expected {MAGIC!r}, found {magic!r} (not a .petit file)")
        if version != VERSION:
            raise self._err("version", f"unsupported version {version} (this reader supports {VERSION})")
        if alignment != ALIGNMENT:
            raise self._err("alignment", f"must be {ALIGNMENT}, found {alignment}")
        if size < file_size:
            raise self._err("file_size", f"truncated: header says {file_size} bytes, file has {size}")
        if size > file_size:
            raise self._err("file_size", f"header says {file_size} bytes, file has {size} (trailing data)")
        if meta_size > file_size - HEADER_SIZE:
            raise self._err("meta_size", f"{meta_size} runs past the end of the file ({file_size} bytes)")
        if table_offset != HEADER_SIZE + meta_size:
            raise self._err("table_offset", f"{table_offset} must equal 64 + meta_size = {HEADER_SIZE + meta_size}")
        if data_offset % ALIGNMENT:
            raise self._err("data_offset", f"{data_offset} is not a multiple of {ALIGNMENT}")
        if not table_offset <= data_offset <= file_size:
            raise self._err("data_offset", f"{data_offset} is outside table_offset {table_offset} .. "
                                           f"file_size {file_size}")
        if n_tensors > (data_offset - table_offset) // _MIN_ENTRY:
            raise self._err("n_tensors", f"{n_tensors} entries cannot fit in the "
                                         f"{data_offset - table_offset}-byte tensor table")
        try:
            meta = json.loads(mm[HEADER_SIZE:table_offset].decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError as e:
            raise self._err("metadata", f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
        except (ValueError, RecursionError) as e:
            raise self._err("metadata", f"not valid JSON ({e})") from None
        if not isinstance(meta, dict):
            raise self._err("metadata", f"must be a JSON object, found {type(meta).__name__}")
        self.metadata = meta
        self.tensors = self._read_table(n_tensors, table_offset, data_offset, file_size)

    def _read_table(self, n_tensors, pos, end, file_size) -> dict:
        mm, tensors = self._mm, {}

        def take(fmt, where):
            nonlocal pos
            n = struct.calcsize(fmt)
            if pos + n > end:
                raise self._err(where, f"tensor table runs past data_offset {end}")
            vals = struct.unpack_from(fmt, mm, pos)
            pos += n
            return vals

        for i in range(n_tensors):
            where = f"tensor #{i}"
            (name_len,) = take("<I", f"{where} name_len")
            if not 1 <= name_len <= MAX_NAME_LEN:
                raise self._err(f"{where} name_len", f"{name_len} is not in 1..{MAX_NAME_LEN}")
            (raw_name,) = take(f"<{name_len}s", f"{where} name")
            try:
                name = raw_name.decode("utf-8")
            except UnicodeDecodeError as e:
                raise self._err(f"{where} name", f"not valid UTF-8 ({e.reason} at byte {e.start})") from None
            where = f"tensor {name!r}"
            if name in tensors:
                raise self._err(where, "duplicate tensor name")
            code, ndim = take("<II", where)
            if code not in _CODE_DTYPES:
                raise self._err(where, f"unknown dtype code {code}")
            dtype = _CODE_DTYPES[code]
            if not 1 <= ndim <= MAX_NDIM:
                raise self._err(where, f"ndim {ndim} is not in 1..{MAX_NDIM}")
            shape = take(f"<{ndim}Q", where)
            offset, nbytes = take("<QQ", where)
            if 0 in shape:
                raise self._err(where, f"shape {shape} has a zero dimension")
            try:
                expected = tensor_nbytes(dtype, shape)
            except ValueError as e:
                raise self._err(where, str(e)) from None
            if nbytes != expected:
                raise self._err(where, f"nbytes {nbytes} does not match dtype {dtype} and shape {shape} "
                                       f"(expected {expected})")
            if offset % ALIGNMENT:
                raise self._err(where, f"offset {offset} is not a multiple of {ALIGNMENT}")
            if end + offset + nbytes > file_size:
                raise self._err(where, f"data (offset {offset}, nbytes {nbytes}) extends past the end of the "
                                       f"file ({file_size} bytes)")
            tensors[name] = TensorInfo(name, dtype, shape, offset, nbytes)
        self._data_offset = end
        return tensors

    def raw(self, name: str) -> np.ndarray:
        """Return a zero-copy, read-only uint8 view of the tensor's stored bytes.

        Raises:
            PetitFileError: No tensor `name`, or the file is closed.
        """
        info = self.tensors.get(name)
        if info is None:
            raise self._err(f"tensor {name!r}", "no such tensor")
        if self._mm is None:
            raise self._err(f"tensor {name!r}", "file is closed")
        return np.frombuffer(self._mm, np.uint8, info.nbytes, self._data_offset + info.offset)

    def array(self, name: str) -> np.ndarray:
        """Return a zero-copy, read-only typed view of a tensor.

        f32 -> float32 of `shape`; f16 -> float16 of `shape`; bf16 -> uint16 of `shape`;
        a block type -> uint8 of `shape[:-1] + (shape[-1] // block_values * block_bytes,)` (one row of blocks per
        row).

        Raises:
            PetitFileError: No tensor `name`, or the file is closed.
        """
        raw, info = self.raw(name), self.tensors[name]
        if info.dtype in BLOCKS:
            size, nb = BLOCKS[info.dtype]
            return raw.reshape(info.shape[:-1] + (info.shape[-1] // size * nb + ROW_HEADERS.get(info.dtype, 0),))
        return raw.view(_VIEW_DTYPES[info.dtype]).reshape(info.shape)

    def check_checksums(self, release: bool = False) -> str | None:
        """Hold every tensor to the checksum its metadata records (pt64, else the SHA-256 `petit export` wrote
        before pt64 existed), in file order, across the kernel threads. release: let go of each tensor's pages once
        checked (`release`), so a mapped file is never resident at once (a load that copies the weights out).

        Returns:
            None when every tensor was checked; a warning message (naming the file) when the file records no
            checksums, so damage to it cannot be detected.

        Raises:
            PetitFileError: a tensor whose bytes do not match (the file is damaged), a tensor without a recorded
                checksum or a checksum for a tensor the file does not hold; the message names the tensor.
        """
        recorded = self.metadata.get("checksums")
        recorded = recorded if isinstance(recorded, dict) else {}
        if isinstance(recorded.get("pt64"), dict):
            kind, table, digest = "pt64", recorded["pt64"], checksum_hex
        elif isinstance(recorded.get("sha256"), dict):
            import hashlib      # here only: it maps libcrypto (3 MB), which a file with pt64 never needs
            kind, table, digest = "sha256", recorded["sha256"], lambda raw: hashlib.sha256(raw).hexdigest()
        else:
            return (f"{self.path}: the file records no checksums, so damage to its weights cannot be detected "
                    f"(convert or export the model again to add them)")
        for name in table:
            if name not in self.tensors:
                raise self._err(f"checksums.{kind}", f"names tensor {name!r}, which the file does not hold")
        for name in self.tensors:
            if name not in table:
                raise self._err(f"tensor {name!r}", f"no {kind} checksum recorded for it in the metadata")
            got = digest(self.raw(name))
            if release:
                self.release(name)
            if got != table[name]:
                raise self._err(f"tensor {name!r}", f"damaged: its {kind} checksum is {got}, the file records "
                                                    f"{table[name]} (download or convert the model again)")
        return None

    def release(self, name: str, rows: tuple[int, int] | None = None) -> None:
        """Tell the kernel this process is done with the pages of a mapped file's tensor `name` for now, or with
        those of its outer rows [r0, r1) (MADV_DONTNEED): they leave the resident set, the page cache keeps them,
        and reading them again maps them back in. A no-op for a file read into private memory (whose pages would be
        lost) and where unsupported."""
        info = self.tensors.get(name)
        if info is not None and self.mapped:
            begin = self._data_offset + info.offset
            release_rows(self._mm, begin, begin + info.nbytes, info.shape[0] if info.shape else 1, rows)

    def close(self) -> None:
        """Release the memory map. Idempotent; never raises if views are still alive (see class doc)."""
        close_map(self._mm)
        self._mm = None

    def __enter__(self) -> "PetitFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_petit(path) -> PetitFile:
    """Open and validate a `.petit` file.

    Args:
        path: File path.

    Returns:
        An open `PetitFile`; close it (or use it as a context manager) when done.

    Raises:
        PetitFileError: The file is missing or invalid; the message names the file and the field.
    """
    return PetitFile(path)
