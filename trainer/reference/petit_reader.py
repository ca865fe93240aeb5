"""Reading a `.petit` file without the engine: the header and tensor table parsed with `struct`, the tensors read
with `np.frombuffer` over an `mmap`, every type (f32, f16, bf16, q8_0, q4_0, q5_0, q4_k, q5_k, q6_k) decoded here
to float64, as `docs/petit-format.md` describes it. Also the engine's activation rounding (q8 blocks), so the
reference can apply it before a product with a matrix of a block type."""
import json
import mmap
import struct

import numpy as np

MAGIC = b"PETIT\0\0\0"
DTYPES = {0: "f32", 1: "f16", 2: "bf16", 3: "q8_0", 4: "q4_0", 5: "q5_0", 6: "q4_k", 7: "q5_k", 8: "q6_k", 9: "tq2"}
KQ8 = {"q4_k", "q5_k", "q6_k"}      # the engine rounds their products' inputs per 256 values (kernels/internal.h)
BLOCKS = {"q8_0": (32, 34), "q4_0": (32, 18), "q5_0": (32, 22), "q4_k": (256, 144), "q5_k": (256, 176),
          "q6_k": (256, 210)}                    # values and bytes per block
ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


def _f16(b: np.ndarray) -> np.ndarray:
    """The little-endian fp16 in the first two bytes of each block row, as float64 [n, 1]."""
    return b[:, :2].copy().view("<f2").astype(np.float64)


def _bits(v: np.ndarray, shift, width: int = 1) -> np.ndarray:
    return (v.astype(np.int64) >> shift) & ((1 << width) - 1)


def _k4_scales(s: np.ndarray):
    """A Q4_K / Q5_K block's 8 six-bit scales and mins from its 12 bytes [n, 12] -> two [n, 8]."""
    s = s.astype(np.int64)
    lo_sc, lo_m = s[:, 0:4] & 63, s[:, 4:8] & 63
    hi_sc = (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)
    hi_m = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return np.concatenate([lo_sc, hi_sc], 1), np.concatenate([lo_m, hi_m], 1)


def _decode_block(b: np.ndarray, dtype: str) -> np.ndarray:
    """[n_blocks, block bytes] -> float64 values [n_blocks, block values], GGML's layouts (docs/petit-format.md)."""
    if dtype == "q8_0":
        return b[:, 2:].copy().view(np.int8).astype(np.float64) * _f16(b)
    if dtype == "q4_0":                          # byte j: element j in the low nibble, j + 16 in the high one
        nib = b[:, 2:]
        return (np.concatenate([nib & 0x0F, nib >> 4], axis=1).astype(np.float64) - 8.0) * _f16(b)
    if dtype == "q5_0":                          # + a fifth bit per element from the 32-bit qh
        qh = b[:, 2:6].copy().view("<u4").astype(np.int64)                  # [n, 1]
        j = np.arange(16)
        lo = (b[:, 6:] & 15).astype(np.int64) | (_bits(qh, j) << 4)
        hi = (b[:, 6:] >> 4).astype(np.int64) | (_bits(qh, j + 16) << 4)
        return (np.concatenate([lo, hi], 1) - 16.0) * _f16(b)
    if dtype in ("q4_k", "q5_k"):                # 8 sub-blocks of 32: d * sc * q - dmin * m
        sc, m = _k4_scales(b[:, 4:16])
        qs = b[:, 48:] if dtype == "q5_k" else b[:, 16:]
        q = np.empty((len(b), 8, 32), np.int64)
        for c in range(4):                       # 32 bytes hold 64 values: low nibbles first, then high
            q[:, 2 * c] = qs[:, 32 * c:32 * c + 32] & 15
            q[:, 2 * c + 1] = qs[:, 32 * c:32 * c + 32] >> 4
            if dtype == "q5_k":
                qh = b[:, 16:48]
                q[:, 2 * c] |= _bits(qh, 2 * c) << 4
                q[:, 2 * c + 1] |= _bits(qh, 2 * c + 1) << 4
        d, dmin = _f16(b), b[:, 2:4].copy().view("<f2").astype(np.float64)
        return ((d * sc)[:, :, None] * q - (dmin * m)[:, :, None]).reshape(len(b), 256)
    if dtype == "q6_k":                          # 16 sub-blocks of 16: d * sc * (q - 32), q = 4 low + 2 high bits
        ql, qh = b[:, :128].astype(np.int64), b[:, 128:192].astype(np.int64)
        sc = b[:, 192:208].copy().view(np.int8).astype(np.float64)
        d = b[:, 208:210].copy().view("<f2").astype(np.float64)
        q = np.empty((len(b), 256), np.int64)
        for h in range(2):
            lq, hq, o = ql[:, 64 * h:64 * h + 64], qh[:, 32 * h:32 * h + 32], 128 * h
            q[:, o:o + 32] = (lq[:, :32] & 15) | (_bits(hq, 0, 2) << 4)
            q[:, o + 32:o + 64] = (lq[:, 32:] & 15) | (_bits(hq, 2, 2) << 4)
            q[:, o + 64:o + 96] = (lq[:, :32] >> 4) | (_bits(hq, 4, 2) << 4)
            q[:, o + 96:o + 128] = (lq[:, 32:] >> 4) | (_bits(hq, 6, 2) << 4)
        return (d * sc).repeat(16, axis=1) * (q - 32.0)
    raise ValueError(f"unknown block type {dtype!r}")


def decode(buf, dtype: str, shape) -> np.ndarray:
    """The float64 values of a tensor stored as `dtype` with `shape`, from its raw bytes."""
    n = int(np.prod(shape))
    if dtype == "f32":
        return np.frombuffer(buf, "<f4", n).astype(np.float64).reshape(shape)
    if dtype == "f16":
        return np.frombuffer(buf, "<f2", n).astype(np.float64).reshape(shape)
    if dtype == "bf16":                          # the upper 16 bits of a float32
        return (np.frombuffer(buf, "<u2", n).astype(np.uint32) << 16).view("<f4").astype(np.float64).reshape(shape)
    if dtype == "tq2":                           # per row: float32 scale, then 8 bytes per 32 ternary values
        rows, cols = int(np.prod(shape[:-1])), shape[-1]
        raw = np.frombuffer(buf, np.uint8, rows * (4 + cols // 4)).reshape(rows, 4 + cols // 4)
        scale = raw[:, :4].copy().view("<f4").astype(np.float64)                   # [rows, 1]
        b = raw[:, 4:].reshape(rows, cols // 32, 1, 8)
        t = ((b >> (2 * np.arange(4))[None, None, :, None]) & 3).astype(np.float64) - 1.0   # value j + 8k at [k, j]
        return (t.reshape(rows, cols) * scale).reshape(shape)
    size, nb = BLOCKS[dtype]
    blocks = np.frombuffer(buf, np.uint8, n // size * nb).reshape(n // size, nb)
    return _decode_block(blocks, dtype).reshape(shape)


def round_per_token(x: np.ndarray) -> np.ndarray:
    """BitNet's activation rounding (transformers' ActQuant), per row: s = 127 / max(max|x|, 1e-5) in float32,
    q = clamp(round-half-even(x s), -128, 127), x = q / s."""
    x = x.astype(np.float32)
    s = np.float32(127) / np.maximum(np.abs(x).max(axis=-1, keepdims=True), np.float32(1e-5))
    return np.clip(np.rint(x * s), -128, 127).astype(np.float64) / s.astype(np.float64)


def round_to_int8_blocks(x: np.ndarray, size: int = 32) -> np.ndarray:
    """x rounded as a q8 activation block: per `size` values (32; 256 for the K-quants, KQ8, as llama.cpp's Q8_K)
    d = max|x| / 127 (float32), q = round-half-even(x * (1/d)); a block whose 1/d overflows (all zero or tiny)
    becomes zero."""
    b = x.astype(np.float32).reshape(*x.shape[:-1], -1, size)
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
            size, nb = BLOCKS.get(dtype, (32, 8) if dtype == "tq2" else (1, ELEM_BYTES.get(dtype, 0)))
            want = n // size * nb + (n // shape[-1] * 4 if dtype == "tq2" else 0)    # tq2: a scale per row
            if dtype is None or nbytes != want or data_offset + offset + nbytes > len(mm) or shape[-1] % size:
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
