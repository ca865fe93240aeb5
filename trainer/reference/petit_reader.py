"""Reading a `.petit` file without the engine: the header and tensor table parsed with `struct`, the tensors read
with `np.frombuffer` over an `mmap`, every block type (f32, f16, bf16, q8_0, q4_0) decoded here to float64, as
`docs/petit-format.md` describes it. Also the engine's activation rounding (q8 blocks), so the reference can apply
it before a product with a q8_0 / q4_0 matrix."""
import json
import mmap
import struct

import numpy as np

MAGIC = b"PETIT\0\0\0"
DTYPES = {0: "f32", 1: "f16", 2: "bf16", 3: "q8_0", 4: "q4_0"}
BLOCK_BYTES = {"q8_0": 34, "q4_0": 18}           # per 32 values: fp16 scale + 32 int8 / 16 bytes of nibbles
ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def decode(buf, dtype: str, shape) -> np.ndarray:
    """The float64 values of a tensor stored as `dtype` with `shape`, from its raw bytes."""
    n = int(np.prod(shape))
    if dtype == "f32":
        return np.frombuffer(buf, "<f4", n).astype(np.float64).reshape(shape)
    if dtype == "f16":
        return np.frombuffer(buf, "<f2", n).astype(np.float64).reshape(shape)
    if dtype == "bf16":                          # the upper 16 bits of a float32
        return (np.frombuffer(buf, "<u2", n).astype(np.uint32) << 16).view("<f4").astype(np.float64).reshape(shape)
    blocks = np.frombuffer(buf, np.uint8, n // 32 * BLOCK_BYTES[dtype]).reshape(n // 32, BLOCK_BYTES[dtype])
    d = blocks[:, :2].copy().view("<f2").astype(np.float64)                # [n_blocks, 1]
    if dtype == "q8_0":
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)
    else:                                        # byte j: element j in the low nibble, j + 16 in the high one
        nib = blocks[:, 2:]
        q = np.concatenate([nib & 0x0F, nib >> 4], axis=1).astype(np.float64) - 8.0
    return (q * d).reshape(shape)


def round_to_int8_blocks(x: np.ndarray) -> np.ndarray:
    """x rounded as a q8 activation block: per 32 values d = max|x| / 127 (float32), q = round-half-even(x * (1/d));
    a block whose 1/d overflows (all zero or tiny) becomes zero."""
    b = x.astype(np.float32).reshape(*x.shape[:-1], -1, 32)
    d = np.abs(b).max(axis=-1, keepdims=True) / np.float32(127)
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.float32(1) / d
    d[~np.isfinite(inv)], inv[~np.isfinite(inv)] = 0, 0
    return (np.clip(np.rint(b * inv), -127, 127) * d.astype(np.float64)).reshape(x.shape)


class PetitReader:
    """A `.petit` file, memory-mapped and parsed.

    Attributes:
        metadata: the metadata dict; config: its `config` dict (Hugging Face names).
        tensors: name -> (dtype, shape, absolute byte offset, nbytes).

    Raises (from __init__):
        ValueError: not a readable version-1 `.petit` file.
        OSError: the file cannot be opened.
    """

    def __init__(self, path):
        self.path = str(path)
        with open(self.path, "rb") as f:
            if f.read(8) != MAGIC:
                raise ValueError(f"{self.path}: not a .petit file (it does not start with {MAGIC!r})")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._parse()
        except (KeyError, TypeError, struct.error, UnicodeDecodeError, json.JSONDecodeError) as e:
            self.close()
            raise ValueError(f"{self.path}: cannot be read as a model ({type(e).__name__}: {e})") from None
        except BaseException:
            self.close()
            raise

    def _parse(self) -> None:
        mm = self._mm
        if len(mm) < 64:
            raise ValueError(f"{self.path}: truncated: {len(mm)} bytes, shorter than the 64-byte header")
        version, _align, meta_size, n_tensors, table_offset, data_offset, file_size = struct.unpack_from(
            "<IIQQQQQ", mm, 8)
        if version != 1 or file_size != len(mm) or table_offset != 64 + meta_size or data_offset > len(mm):
            raise ValueError(f"{self.path}: bad header (version {version}, file_size {file_size} for "
                             f"{len(mm)} bytes, table_offset {table_offset}, data_offset {data_offset})")
        self.metadata = json.loads(mm[64:table_offset].decode("utf-8"))
        self.config = self.metadata["config"]
        if not isinstance(self.config, dict):
            raise TypeError("metadata 'config' is not an object")
        self.tensors, pos = {}, table_offset
        for _ in range(n_tensors):
            (name_len,) = struct.unpack_from("<I", mm, pos)
            name = mm[pos + 4:pos + 4 + name_len].decode("utf-8")
            code, ndim = struct.unpack_from("<II", mm, pos + 4 + name_len)
            shape = struct.unpack_from(f"<{ndim}Q", mm, pos + 12 + name_len)
            offset, nbytes = struct.unpack_from("<QQ", mm, pos + 12 + name_len + 8 * ndim)
            pos += 28 + name_len + 8 * ndim
            dtype = DTYPES.get(code)
            n = int(np.prod(shape))
            want = n // 32 * BLOCK_BYTES[dtype] if dtype in BLOCK_BYTES else n * ELEM_BYTES.get(dtype, 0)
            if dtype is None or nbytes != want or data_offset + offset + nbytes > len(mm) or \
                    (dtype in BLOCK_BYTES and shape[-1] % 32):
                raise ValueError(f"{self.path}: tensor {name!r}: bad entry (dtype code {code}, shape {shape}, "
                                 f"offset {offset}, nbytes {nbytes})")
            self.tensors[name] = (dtype, tuple(shape), data_offset + offset, nbytes)

    def raw(self, name: str) -> memoryview:
        """The stored bytes of a tensor (no copy)."""
        _, _, start, nbytes = self.tensors[name]
        return memoryview(self._mm)[start:start + nbytes]

    def weight(self, name: str) -> np.ndarray:
        """A tensor decoded to float64."""
        if name not in self.tensors:
            raise ValueError(f"{self.path}: tensor {name!r} missing")
        dtype, shape, _, _ = self.tensors[name]
        return decode(self.raw(name), dtype, shape)

    def close(self) -> None:
        """Unmap the file (if raw() views are still alive, the mapping goes when they do)."""
        try:
            self._mm.close()
        except BufferError:
            pass
