"""Reader for `pytorch_model.bin` (the zip format of `torch.save`), without torch and without running its code.

A torch checkpoint is a zip archive holding `<archive>/data.pkl` (a pickle of the state dict whose tensors refer
to storages by persistent id), one member `<archive>/data/<key>` per storage (raw element bytes, stored
uncompressed), `<archive>/byteorder` and `<archive>/version`. Unpickling is restricted: `find_class` hands out
only inert stand-ins for the handful of globals a state dict of tensors needs, so a malicious pickle cannot call
anything. Tensors are zero-copy numpy views into a memory map of the archive.
"""

import collections
import io
import math
import os
import pickle
import struct
import zipfile
from typing import NamedTuple

import numpy as np

from petit.formats.pages import close_map
from petit.formats.tensor_file import TensorFile

# torch storage class -> (Petit dtype name, numpy dtype character without byte order; bf16 is viewed as uint16)
STORAGES = {
    "FloatStorage": ("f32", "f4"),
    "HalfStorage": ("f16", "f2"),
    "BFloat16Storage": ("bf16", "u2"),
    "DoubleStorage": ("f64", "f8"),
    "LongStorage": ("i64", "i8"),
    "IntStorage": ("i32", "i4"),
    "ShortStorage": ("i16", "i2"),
    "CharStorage": ("i8", "i1"),
    "ByteStorage": ("u8", "u1"),
    "BoolStorage": ("bool", "b1"),
}
MAX_PICKLE_SIZE = 256 << 20  # data.pkl holds only structure (~100 bytes a tensor); bigger is corrupt or hostile
_DTYPE_CHARS = {dtype: char for dtype, char in STORAGES.values()}
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # zip local file header, 30 bytes


class TorchBinError(ValueError):
    """A torch checkpoint is missing, invalid or unsafe; the message names the file (and the tensor, if any)."""


class _StorageType(str):
    """Inert stand-in for `torch.FloatStorage` & co.: just the class name (immutable, no attributes)."""

    __slots__ = ()


class _StorageRef(NamedTuple):
    """What `persistent_load` returns for ('storage', type, key, location, numel)."""

    storage_type: _StorageType
    key: str
    numel: int


class _TensorRef(NamedTuple):
    """What the stand-in `_rebuild_tensor_v2` returns: its raw arguments, validated after unpickling."""

    storage: object
    offset: object
    size: object
    stride: object


class TensorEntry(NamedTuple):
    """A validated tensor: `data_key` names the member `<archive>/data/<key>` holding its storage."""

    dtype: str  # Petit name: "f32", "bf16", ...
    shape: tuple
    stride: tuple  # in elements
    offset: int  # storage offset, in elements
    data_key: str


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    return _TensorRef(storage, storage_offset, size, stride)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data


_GLOBALS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the globals of a plain state dict, each to an inert stand-in."""

    def __init__(self, data: bytes, path: str):
        super().__init__(io.BytesIO(data))
        self._path = path

    def find_class(self, module, name):
        if (module, name) in _GLOBALS:
            return _GLOBALS[module, name]
        if module == "torch" and name in STORAGES:
            return _StorageType(name)
        if module == "torch" and name.endswith("Storage"):
            raise TorchBinError(f"{self._path}: tensor storage type 'torch.{name}' is not supported "
                                f"(supported: {', '.join(STORAGES)})")
        raise TorchBinError(f"{self._path}: refusing to unpickle '{module}.{name}': a checkpoint may only "
                            f"hold tensors")

    def persistent_load(self, pid):
        if (not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage"
                or not isinstance(pid[1], _StorageType) or not isinstance(pid[2], str)
                or type(pid[4]) is not int or pid[4] < 0):
            raise TorchBinError(f"{self._path}: unexpected persistent id {pid!r} (expected ('storage', "
                                f"storage type, key, location, numel))")
        return _StorageRef(pid[1], pid[2], pid[4])


def _legacy_message(path: str, head: bytes) -> str:
    if head[:1] == b"\x80" or head[257:262] == b"ustar":
        return (f"{path}: this is the legacy (pre-1.6, non-zip) torch checkpoint format, which Petit does not "
                f"read; load it with torch and re-save it as safetensors, e.g. "
                f"`safetensors.torch.save_file(torch.load(path), 'model.safetensors')`")
    return f"{path}: not a torch checkpoint (not a zip archive; truncated or a different format)"


class TorchBinFile(TensorFile):
    """A validated torch zip checkpoint, memory-mapped.

    Attributes:
        path: The path as given (used in every error message).
        entries: tensor name -> TensorEntry, in the order of the state dict.
        byteorder: "little" or "big", from `<archive>/byteorder` (little when absent, as older torch wrote).

    Views returned by `raw()` point into the mapping; `close()` unmaps once no view is alive.
    """

    Error = TorchBinError

    def __init__(self, path):
        """Open, memory-map, unpickle (restricted) and validate `path`.

        Guarantees: after a successful return every entry has a supported dtype, its storage member exists, lies
        inside the file and holds exactly numel x itemsize bytes, its strides are C-contiguous ones up to an order
        of the dimensions (so it is a run of consecutive storage elements: reading it never needs more memory than
        its storage), and every element its size/stride/offset reaches lies inside its storage.
        Nothing from the pickle has been executed: only the stand-ins in this module were called.

        Raises:
            TorchBinError: The file is missing, in the legacy format, unsafe, or fails any of those checks.
        """
        self.path = os.fspath(path)
        self._mm = self._zip = None
        def check(size):
            if size == 0:
                raise self._err("file is empty")
        size, head = self._map(check, head=512)
        try:
            try:
                self._zip = zipfile.ZipFile(self.path)
            except (zipfile.BadZipFile, OSError, ValueError):
                raise TorchBinError(_legacy_message(self.path, head)) from None
            self._validate(size)
        except BaseException:
            self.close()
            raise

    def _validate(self, size: int) -> None:
        members = {info.filename: info for info in self._zip.infolist()}
        pkls = [n for n in members if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkls) != 1:
            found = "none" if not pkls else ", ".join(pkls)
            raise self._err(f"expected exactly one '<archive>/data.pkl' in the zip archive, found {found} "
                            f"(not a torch checkpoint?)")
        if members[pkls[0]].file_size > MAX_PICKLE_SIZE:
            raise self._err(f"{pkls[0]} is {members[pkls[0]].file_size} bytes, larger than the {MAX_PICKLE_SIZE}-byte "
                            f"limit for a state dict's structure")
        self._prefix = pkls[0][:-len("data.pkl")]
        self._members, self._size, self._offsets = members, size, {}
        order = members.get(self._prefix + "byteorder")
        self.byteorder = self._read(order).decode("ascii", "replace").strip() if order else "little"
        if self.byteorder not in ("little", "big"):
            raise self._err(f"byteorder member says {self.byteorder!r}, expected 'little' or 'big'")
        try:
            obj = _RestrictedUnpickler(self._read(members[pkls[0]]), self.path).load()
        except TorchBinError:
            raise
        except Exception as e:  # any malformed pickle: truncated, bad opcode, wrong argument count, ...
            raise self._err(f"{pkls[0]} is not a valid checkpoint pickle ({type(e).__name__}: {e})") from None
        if not isinstance(obj, dict):
            raise self._err(f"expected a state dict (a dict of tensors), found {type(obj).__name__}")
        self.entries, seen = {}, {}
        for name, value in obj.items():
            if not isinstance(name, str):
                raise self._err(f"state dict key {name!r} is not a string")
            if not isinstance(value, _TensorRef):
                raise self._err(f"value is a {type(value).__name__}, not a tensor (expected a flat state dict)",
                                name)
            self.entries[name] = self._entry(name, value, seen)

    def _entry(self, name: str, ref: _TensorRef, seen: dict) -> TensorEntry:
        storage, offset, size, stride = ref
        if not isinstance(storage, _StorageRef):
            raise self._err(f"tensor storage is a {type(storage).__name__}, not a persistent storage", name)
        if type(offset) is not int or offset < 0:
            raise self._err(f"storage offset {offset!r} is not a non-negative integer", name)
        for what, dims in (("size", size), ("stride", stride)):
            if not isinstance(dims, tuple) or any(type(d) is not int or d < 0 for d in dims):
                raise self._err(f"{what} {dims!r} is not a tuple of non-negative integers", name)
        if len(size) != len(stride):
            raise self._err(f"size {size} and stride {stride} have different lengths", name)
        dtype, char = STORAGES[storage.storage_type]
        key = storage.key
        if seen.setdefault(key, storage.storage_type) != storage.storage_type:
            raise self._err(f"storage {key!r} is used as both torch.{seen[key]} and torch.{storage.storage_type}",
                            name)
        member = self._members.get(f"{self._prefix}data/{key}")
        if member is None:
            raise self._err(f"its storage member '{self._prefix}data/{key}' is missing from the archive", name)
        itemsize = np.dtype(char).itemsize
        if member.file_size != storage.numel * itemsize:
            raise self._err(f"storage '{self._prefix}data/{key}' holds {member.file_size} bytes, but "
                            f"{storage.numel} x torch.{storage.storage_type} need {storage.numel * itemsize}", name)
        if key not in self._offsets:  # every storage must lie inside the file, whatever claims its record makes
            self._offsets[key] = self._data_offset(member)
        numel = math.prod(size)
        if numel:
            # Only C-contiguous strides in some order of the dimensions (a transposed tensor): the tensor is then
            # exactly `numel` consecutive elements of its storage, so reading it costs no more memory than the
            # storage itself. A stride of 0 (an expanded tensor) or overlapping / gapped strides would let a tiny
            # storage stand for an arbitrarily large array.
            expect = 1
            for s, n in sorted((s, n) for n, s in zip(size, stride) if n > 1):  # a size-1 dim's stride is unused
                if s != expect:
                    raise self._err(f"stride {stride} for size {size} is not a permutation of contiguous strides "
                                    f"(expanded, overlapping or gapped tensors are not supported)", name)
                expect *= n
            last = offset + numel - 1
            if last >= storage.numel:
                raise self._err(f"size {size}, stride {stride} and offset {offset} reach element {last}, past "
                                f"the {storage.numel} elements of its storage", name)
        return TensorEntry(dtype, size, stride, offset, key)

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Absolute file offset of a member's data (read from its local header), bounds-checked."""
        pos = info.header_offset
        if pos + _LOCAL_HEADER.size > self._size:
            raise self._err(f"zip member {info.filename!r} lies past the end of the file")
        sig, _, flags, _, _, _, _, _, _, name_len, extra_len = _LOCAL_HEADER.unpack_from(self._mm, pos)
        if sig != b"PK\x03\x04" or flags & 1:
            raise self._err(f"zip member {info.filename!r} has a bad local header (or is encrypted)")
        start = pos + _LOCAL_HEADER.size + name_len + extra_len
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise self._err(f"zip member {info.filename!r} is stored uncompressed but its sizes disagree")
        if start + info.compress_size > self._size:
            raise self._err(f"zip member {info.filename!r} runs past the end of the file (truncated)")
        return start

    def _read(self, info: zipfile.ZipInfo) -> bytes:
        try:
            return self._zip.read(info)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:
            raise self._err(f"cannot read zip member {info.filename!r}: {e}") from None

    def raw(self, name: str) -> np.ndarray:
        """Return `name` as a read-only, C-contiguous array of native byte order with its dtype (bf16 as uint16)
        and shape.

        Zero-copy (a view into the memory map) when its storage member is stored uncompressed, as torch writes
        it, the tensor is contiguous and the file's byte order is the machine's; otherwise a copy (compressed
        member, transposed tensor, or a byte swap).

        Raises:
            TorchBinError: No tensor `name`, or the file is closed.
        """
        e = self._get(name)
        if self._mm is None:
            raise self._err("file is closed", name)
        dtype = np.dtype(("<" if self.byteorder == "little" else ">") + _DTYPE_CHARS[e.dtype])
        info = self._members[f"{self._prefix}data/{e.data_key}"]
        count = info.file_size // dtype.itemsize
        if info.compress_type == zipfile.ZIP_STORED:
            storage = np.frombuffer(self._mm, dtype, count, self._offsets[e.data_key])
        else:
            storage = np.frombuffer(self._read(info), dtype, count)
        strides = tuple(s * dtype.itemsize for s in e.stride)
        view = np.lib.stride_tricks.as_strided(storage[e.offset:], e.shape, strides, writeable=False)
        if not dtype.isnative:  # a file written on a machine of the other byte order: swap into a copy
            out = view.astype(dtype.newbyteorder("="))
        elif view.flags.c_contiguous:  # the same elements as a plain slice, whose base is the map itself
            return storage[e.offset:e.offset + view.size].reshape(e.shape)
        else:
            out = np.ascontiguousarray(view)
        out.flags.writeable = False
        return out

    def close(self) -> None:
        """Release the memory map and the archive. Idempotent; never raises if views are still alive."""
        zf, self._zip = self._zip, None
        if zf is not None:
            zf.close()
        close_map(self._mm)
        self._mm = None
