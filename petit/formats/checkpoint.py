"""The one entry point for reading the weights of a Hugging Face model folder: `open_checkpoint(folder)`.

It picks the checkpoint the way transformers does (sharded safetensors, single safetensors, sharded
`pytorch_model.bin`, single `pytorch_model.bin`), opens and validates every file up front (memory-mapped:
nothing is read into memory), and gives one flat view of all tensors, whatever file holds them.
"""

import json
import os

import numpy as np

from petit.formats.safetensors import SafetensorsError, SafetensorsFile
from petit.formats.torch_bin import TorchBinError, TorchBinFile

# In order of precedence: (file name, is an index, reader of the weight files)
CANDIDATES = (
    ("model.safetensors.index.json", True, SafetensorsFile),
    ("model.safetensors", False, SafetensorsFile),
    ("pytorch_model.bin.index.json", True, TorchBinFile),
    ("pytorch_model.bin", False, TorchBinFile),
)
DTYPES = ("f32", "f16", "bf16", "f64", "i64", "i32", "i16", "i8", "u8", "bool")


class CheckpointError(ValueError):
    """A checkpoint is missing, invalid or unsafe; every message names the file, and the tensor when there is one."""


def _open_file(reader, path: str):
    try:
        return reader(path)
    except (SafetensorsError, TorchBinError) as e:
        raise CheckpointError(str(e)) from None


def _read_index(path: str) -> dict:
    """Return the validated `weight_map` (tensor name -> shard file name) of a sharded checkpoint's index."""
    try:
        with open(path, "rb") as f:
            index = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise CheckpointError(f"{path}: expected a JSON object with a 'weight_map' object of tensor name -> "
                              f"shard file name")
    for name, shard in weight_map.items():
        parts = shard.replace("\\", "/").split("/")
        if not shard or os.path.isabs(shard) or ".." in parts:
            raise CheckpointError(f"{path}: tensor {name!r}: shard {shard!r} is not a file name inside the folder")
    return weight_map


def open_checkpoint(folder) -> "Checkpoint":
    """Open the checkpoint of a Hugging Face model folder.

    Precedence: model.safetensors.index.json (sharded) > model.safetensors > pytorch_model.bin.index.json
    (sharded) > pytorch_model.bin. Every weight file is opened, memory-mapped and validated now; for a sharded
    checkpoint every tensor the index lists is checked to be in its shard (the index is authoritative: tensors a
    shard holds beyond it are ignored).

    Returns:
        An open `Checkpoint`; close it (or use it as a context manager) when done.

    Raises:
        CheckpointError: The folder is missing, holds none of those files, or a file is missing, invalid or
            unsafe (a pickle that would run code); the message names the file and the tensor.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise CheckpointError(f"{folder}: {'not a directory' if os.path.exists(folder) else 'folder not found'}")
    for file_name, is_index, reader in CANDIDATES:
        path = os.path.join(folder, file_name)
        if not os.path.isfile(path):
            continue
        if not is_index:
            f = _open_file(reader, path)
            return Checkpoint(folder, [f], {name: f for name in f.names()})
        weight_map = _read_index(path)
        by_shard = {}
        for name, shard in weight_map.items():
            by_shard.setdefault(shard, []).append(name)
        for shard, names in by_shard.items():
            if not os.path.isfile(os.path.join(folder, shard)):
                more = f" and {len(names) - 1} more" if len(names) > 1 else ""
                raise CheckpointError(f"{path}: shard {shard!r} (holding {names[0]!r}{more}) is missing from "
                                      f"{folder}")
        opened, where = [], {}
        try:
            for shard, names in by_shard.items():
                f = _open_file(reader, os.path.join(folder, shard))
                opened.append(f)
                for name in names:
                    if name not in f.entries:
                        raise CheckpointError(f"{f.path}: tensor {name!r} is listed in {file_name} but missing "
                                              f"from this shard")
                    where[name] = f
        except BaseException:
            for f in opened:
                f.close()
            raise
        return Checkpoint(folder, opened, where)
    raise CheckpointError(f"{folder}: no checkpoint found (looked for {', '.join(c[0] for c in CANDIDATES)})")


class Checkpoint:
    """All tensors of an opened checkpoint, by name, whatever file holds them.

    Attributes:
        folder: The model folder as given.
        files: Paths of the weight files it reads (the shards for a sharded checkpoint; the index is not listed).
        format: "safetensors" or "pytorch_bin".

    Arrays from `raw()` are views into memory maps; `close()` unmaps once none is alive (else when they are
    garbage collected), so memory use stays at the mapped size.
    """

    def __init__(self, folder: str, readers: list, where: dict):
        """Wrap opened readers; `where` maps each tensor name to the reader holding it. Use `open_checkpoint`."""
        self.folder = folder
        self.files = [r.path for r in readers]
        self.format = "safetensors" if isinstance(readers[0], SafetensorsFile) else "pytorch_bin"
        self._readers, self._where = readers, where
        self._closed = False

    def _reader(self, name: str):
        reader = self._where.get(name)
        if reader is None:
            raise CheckpointError(f"tensor {name!r} is missing from {self.folder}")
        if self._closed:
            raise CheckpointError(f"{reader.path}: tensor {name!r}: the checkpoint is closed")
        return reader

    def names(self) -> list:
        """Every tensor name, sorted."""
        return sorted(self._where)

    def __contains__(self, name) -> bool:
        return name in self._where

    def info(self, name: str) -> tuple:
        """Return (dtype, shape): dtype one of `DTYPES`, shape a tuple of ints. Reads no tensor data.

        Raises:
            CheckpointError: "tensor 'x' is missing from <folder>", or the checkpoint is closed.
        """
        return self._reader(name).info(name)

    def raw(self, name: str) -> np.ndarray:
        """Return a read-only, C-contiguous, native-byte-order array of `name` with its dtype (bf16 as np.uint16)
        and shape.

        Zero-copy (a view into the memory map) except for a pytorch_model.bin tensor that is non-contiguous, whose
        storage is compressed, or whose byte order is not the machine's: those are copied.

        Raises:
            CheckpointError: The tensor is missing or the checkpoint is closed.
        """
        reader = self._reader(name)
        try:
            return reader.raw(name)
        except (SafetensorsError, TorchBinError) as e:
            raise CheckpointError(str(e)) from None

    def f32(self, name: str) -> np.ndarray:
        """Return a new, writable float32 array of `name` with its shape.

        bf16 is converted exactly (its 16 bits become the high half of a float32); f16, f64, integers and bool
        via `astype` (f64 rounds to nearest; large integers may round).

        Raises:
            CheckpointError: The tensor is missing or the checkpoint is closed.
        """
        raw = self.raw(name)
        if self._where[name].info(name)[0] == "bf16":
            bits = raw.astype(np.uint32)
            bits <<= 16
            return bits.view(np.float32)
        return raw.astype(np.float32)

    def release(self, name: str, rows: tuple[int, int] | None = None) -> None:
        """Drop `name`'s mapped pages (or those of its rows [r0, r1)) from the resident set once converted
        (safetensors only), so that reading a whole checkpoint keeps resident memory at a slice's worth, not the
        file's size."""
        reader = self._reader(name)
        if hasattr(reader, "release"):
            reader.release(name, rows)

    def close(self) -> None:
        """Unmap every file. Idempotent; never raises if arrays from `raw()` are still alive."""
        self._closed = True
        for r in self._readers:
            r.close()

    def __enter__(self) -> "Checkpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Checkpoint {self.folder!r}: {len(self._where)} tensors in {len(self.files)} {self.format} file(s)>"
