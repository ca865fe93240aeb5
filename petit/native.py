"""The C boundary: loads the compiled kernels (`petit._kernels`, built by cffi at install time from kernels/*.c),
picks the CPU path once, and wraps the kernels for NumPy callers.

The path and thread count come from the environment when set: PETIT_ISA = scalar | avx2 | avxvnni | avx512 | neon
forces a path (for tests and benchmarks; an unsupported one is an error, never a silent fallback), PETIT_THREADS = N
sets the thread count (default: the CPUs this process may run on).

The NumPy-facing wrappers below (checked inputs, allocated outputs) are for tests, tools and one-off work (quantizing
at export, dequantizing a tensor). The model's per-token loop calls `lib` directly with pointers prepared once at
load (see petit/models/blocks/decoder.py).
"""
import ctypes
import mmap
import os
import warnings

import numpy as np

try:
    from petit._kernels import ffi, lib
except ImportError as e:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        "petit's C kernels (petit._kernels) are not built or cannot be loaded: "
        f"{e}. Reinstall with `pip install .` from the source folder (a C compiler is required)."
    ) from e

ISAS = {"scalar": 0, "avx2": 1, "avxvnni": 4, "avx512": 2, "neon": 3}
ISA_NAMES = {v: k for k, v in ISAS.items()}


def configure(threads: int | None = None, isa: str | None = None) -> None:
    """(Re)start the kernels with a thread count and a CPU path.

    Args:
        threads: worker count including the caller; None reads PETIT_THREADS, else every allowed CPU.
        isa: "scalar", "avx2", "avxvnni", "avx512" or "neon"; None reads PETIT_ISA, else the best the CPU supports.

    Raises:
        ValueError: an unknown or unsupported path, or a bad thread count.
    """
    if isa is None:
        isa = os.environ.get("PETIT_ISA") or None
    if threads is None:
        env = os.environ.get("PETIT_THREADS")
        if env:
            try:
                threads = int(env)
            except ValueError:
                raise ValueError(f"PETIT_THREADS must be a positive integer, got {env!r}") from None
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 256):
        raise ValueError(f"thread count must be an integer in 1..256, got {threads!r}")
    if isa is None:
        code = -1
    elif isa not in ISAS:
        raise ValueError(f"unknown kernel path {isa!r} (PETIT_ISA): choose one of {', '.join(ISAS)}")
    elif not lib.pt_isa_supported(ISAS[isa]):
        raise ValueError(f"kernel path {isa!r} is not supported by this CPU (features: {cpu_features()})")
    else:
        code = ISAS[isa]
    rc = lib.pt_init(threads or 0, code)
    if rc != 0:
        # pt_init keeps the previous path and starts the previous pool again: say what runs now
        raise ValueError(f"could not start the kernels (path {isa!r}, threads {threads!r}), error {rc}; still "
                         f"running path {ISA_NAMES[lib.pt_isa()]!r} on {lib.pt_n_threads()} thread(s)")
    _current.update(threads=lib.pt_n_threads(), isa=ISA_NAMES[lib.pt_isa()], warning=path_warning())
    if _current["warning"]:
        warnings.warn(_current["warning"], RuntimeWarning, stacklevel=2)


_current = {}


def path_warning() -> str:
    """Why the kernels do not run the path asked for (or the best one): it disagreed with the scalar path in the
    start-up check (kernels/pathcheck.c) and the next one down runs instead. "" when nothing was set aside."""
    buf = ffi.new("char[512]")
    lib.pt_path_warning(buf, 512)
    return ffi.string(buf).decode()


def _restart_in_child() -> None:
    # a forked child inherits no worker threads (the C side drops them); start its own with the same settings
    lib.pt_init(_current.get("threads", 0), ISAS[_current.get("isa", "scalar")])


def cpu_features() -> str:
    buf = ffi.new("char[512]")
    lib.pt_cpu_features(buf, 512)
    return ffi.string(buf).decode() or "(none detected)"


def info() -> dict:
    """The CPU features, the active path, the supported paths, the thread count and whether AMX runs."""
    return {
        "cpu_features": cpu_features(),
        "isa": ISA_NAMES[lib.pt_isa()],
        "supported": [name for name, code in ISAS.items() if lib.pt_isa_supported(code)],
        "threads": lib.pt_n_threads(),
        "default_threads": lib.pt_default_threads(),
        "path_warning": path_warning(),
        "amx": amx_status(),
    }


def pool_stats() -> dict:
    """What the thread pool chose since it started (kernels/pool.c): jobs pooled and run by the caller alone, the
    seconds of each, probes of the other way and probes cut short. For benchmarks."""
    out = ffi.new("double[6]")
    lib.pt_pool_stats(out, 6)
    keys = ("jobs_pooled", "jobs_alone", "seconds_pooled", "seconds_alone", "probes", "probes_cut")
    return {k: (float(v) if k.startswith("seconds") else int(v)) for k, v in zip(keys, out)}


def amx_status() -> str:
    """"on" when Intel's AMX tiles run the avx512 path's prefill (kernels/kern_amx.c), else "off: " and why."""
    buf = ffi.new("char[400]")
    on = lib.pt_amx_status(buf, 400)
    return "on" if on else f"off: {ffi.string(buf).decode()}"


configure()
if hasattr(os, "register_at_fork"):   # POSIX only: Windows has no fork()
    os.register_at_fork(after_in_child=_restart_in_child)


DTYPES = {"f32": 0, "f16": 1, "bf16": 2, "q8_0": 3, "q4_0": 4, "tq2": 7}    # tq2: BitNet's ternary rows
INTERLEAVED = {"q8_0": 5, "q4_0": 6}     # the same types interleaved in groups of 8 rows (kernels/interleave.c)
BLOCK = 32


def prefers_interleaved() -> bool:
    """Whether the active kernel path multiplies interleaved q8_0 / q4_0 matrices fastest (x86: AVX2, AVX-512)."""
    return bool(lib.pt_prefers_interleaved())


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim          # glibc (Linux); macOS and Windows have none
    except (AttributeError, OSError):
        return None


_MALLOC_TRIM = _malloc_trim()


def trim_heap() -> bool:
    """Hand the C heap's free memory back to the system (glibc's malloc_trim), as after a load: glibc keeps what was
    freed at the top of its heap, so the ~300,000 strings a GGUF file's 151k-token vocabulary is read into stayed
    resident after the tokenizer was built (60 MiB on Qwen2.5's). False where the C library has no such call."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


def anonymous_map(size: int) -> mmap.mmap:
    """`size` bytes of private anonymous memory, advised for huge pages before it is touched (2 MiB pages where the
    system has transparent huge pages: a decode step streams every weight once, and measured about 15 % faster from
    them than from 4 KiB pages). Raises OSError when the memory cannot be had."""
    flags = getattr(mmap, "MAP_PRIVATE", None)
    size = max(size, 1)
    mm = mmap.mmap(-1, size, flags=flags | mmap.MAP_ANONYMOUS) if flags is not None else mmap.mmap(-1, size)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            mm.madvise(advice)
        except OSError:
            pass
    return mm


HUGE_PAGE_MIN = 4 << 20       # a weight buffer this large or larger is put on huge pages


def weight_buffer(rows: int, rb: int) -> np.ndarray:
    """A uint8 [rows, rb] array for quantized weights: from anonymous_map (huge pages) when it is at least
    HUGE_PAGE_MIN bytes, as a decode streams it every step (a folder quantized into NumPy's own memory decoded 0.5B
    q8_0 at 66.8 tok/s against 76.4 for the same weights on huge pages, Zen 5, 2 threads); else NumPy's."""
    n = rows * rb
    if n >= HUGE_PAGE_MIN:
        try:
            return np.frombuffer(anonymous_map(n), np.uint8, n).reshape(rows, rb)
        except OSError:
            pass
    return np.empty((rows, rb), dtype=np.uint8)


def row_bytes(dtype: str, cols: int) -> int:
    """Bytes of one row of `cols` values stored as `dtype`.

    Raises:
        ValueError: unknown dtype, or cols not a positive multiple of 32 for q8_0 / q4_0.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    n = lib.pt_row_bytes(DTYPES[dtype], int(cols))
    if n < 0:
        block = 256 if dtype.endswith("_k") or dtype == "iq4_xs" else BLOCK
        raise ValueError(f"a row of {cols} values cannot be stored as {dtype}: "
                         f"{dtype} needs a positive multiple of {block} columns")
    return n


def _f32(x: np.ndarray, name: str, ndim: int | None = None) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {x.shape}")
    return x


def _ptr(arr: np.ndarray, ctype: str = "float *"):
    return ffi.cast(ctype, ffi.from_buffer(arr))


def _out(arr: np.ndarray, ctype: str = "float *"):
    """A pointer for C to write through: the array must be writable (a read-only view would be corrupted)."""
    return ffi.cast(ctype, ffi.from_buffer(arr, require_writable=True))


class NonFiniteError(ValueError):
    """A value about to be quantized to q8_0 / q4_0 is NaN or infinite.

    Attributes:
        row, col: where the first such value is; value: what it is.
    """

    def __init__(self, row: int, col: int, value: float, dtype: str):
        self.row, self.col, self.value, self.dtype = row, col, value, dtype
        super().__init__(f"the weight at [{row}, {col}] is {value} (not a finite number); it cannot be stored as "
                         f"{dtype}: the checkpoint is damaged or was saved after training diverged")


SEARCHED = ("q4_0", "q5_0", "q4_k", "q5_k", "q6_k")     # the types kernels/quant_search.c writes


def quantize(x: np.ndarray, dtype: str, search: bool = False) -> np.ndarray:
    """Quantize a float matrix [rows, cols] row by row; returns uint8 [rows, row_bytes].

    search: for q4_0, search each block's scale for the least squared error (kernels/quant_search.c; some 20 times
    slower than GGML's reference rounding, which it never does worse than) instead of d = max / -8. Q5_0, Q4_K, Q5_K
    and Q6_K are always quantized so; f32 / f16 / bf16 / q8_0 ignore it.

    Raises:
        ValueError: naming the shape when cols does not fit the dtype (q8_0 / q4_0 need a multiple of 32).
        NonFiniteError: a NaN or an infinity met by q8_0 / q4_0, naming the first one's row and column (the
            C code detects it while quantizing; only then is the value looked for here).
    """
    x = _f32(x, "x")
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2:
        raise ValueError(f"quantize expects a 1-D or 2-D array, got shape {x.shape}")
    rows, cols = x.shape
    try:
        rb = row_bytes(dtype, cols)
    except ValueError as e:
        raise ValueError(f"cannot quantize a tensor of shape {x.shape} to {dtype}: {e}") from None
    out = weight_buffer(rows, rb)
    if dtype in SEARCHED and (search or dtype != "q4_0"):
        rc = lib.pt_quantize_search(DTYPES[dtype], _ptr(x), rows, cols, _ptr(out, "void *"))
    elif dtype in DTYPES and (DTYPES[dtype] <= DTYPES["q4_0"] or dtype == "tq2"):
        rc = lib.pt_quantize(DTYPES[dtype], _ptr(x), rows, cols, _ptr(out, "void *"))
    else:
        raise ValueError(f"cannot quantize to {dtype}: Petit writes f32, f16, bf16, q8_0, tq2, {', '.join(SEARCHED)}")
    if rc == -2:
        at = int(np.flatnonzero(~np.isfinite(x))[0])
        raise NonFiniteError(at // cols, at % cols, float(x.flat[at]), dtype)
    return out


def pack_tq2(t: np.ndarray, scale: float) -> np.ndarray:
    """Ternary values t [rows, cols] (each -1, 0 or 1) with one scale for every row, as tq2 rows (kernels/internal.h:
    a float32 scale, then per 32 values 8 bytes, value j + 8 k as t + 1 in bits 2k..2k+1 of byte j)."""
    t = np.asarray(t)
    rows, cols = t.shape
    if cols % BLOCK or not np.isin(t, (-1, 0, 1)).all():
        raise ValueError(f"tq2 needs ternary values in rows of whole {BLOCK}-value blocks, got shape {t.shape}")
    u = (t.astype(np.int16) + 1).astype(np.uint8).reshape(rows, cols // BLOCK, 4, 8)
    packed = u[:, :, 0] | (u[:, :, 1] << 2) | (u[:, :, 2] << 4) | (u[:, :, 3] << 6)
    out = weight_buffer(rows, row_bytes("tq2", cols))
    out[:, :4] = np.full((rows, 1), scale, np.float32).view(np.uint8)
    out[:, 4:] = packed.reshape(rows, -1)
    return out


def checksum(data) -> int:
    """The "pt64" checksum (docs/petit-format.md) of a bytes-like object or contiguous array, across the pool."""
    return int(lib.pt_checksum(ffi.from_buffer(data), memoryview(data).nbytes))


def prefixed_starts(buf, pos: int, n: int) -> tuple[np.ndarray, int]:
    """Where each of n length-prefixed strings (a u64 little-endian length, then the bytes; GGUF's string arrays)
    starts in `buf` from byte `pos`, and the position after the last. Raises IndexError(i) when string i does not
    fit in buf."""
    starts = np.empty(n, np.int64)
    end = int(lib.pt_prefixed_starts(ffi.from_buffer(buf), memoryview(buf).nbytes, pos, n,
                                     ffi.cast("int64_t *", starts.ctypes.data)))
    if end < 0:
        raise IndexError(-1 - end)
    return starts, end


def checksum_ref(data) -> int:
    """The same checksum by the plain one-word-at-a-time reference (for tests)."""
    return int(lib.pt_checksum_ref(ffi.from_buffer(data), memoryview(data).nbytes))


def dequantize(raw: np.ndarray, dtype: str, shape: tuple[int, int]) -> np.ndarray:
    """Decode raw rows (as written by `quantize` or read from a file) back to float32 of `shape`."""
    rows, cols = shape
    rb = row_bytes(dtype, cols)
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    if raw.size != rows * rb:
        raise ValueError(f"{raw.size} bytes do not hold a {dtype} tensor of shape {shape} ({rows * rb} expected)")
    out = np.empty((rows, cols), dtype=np.float32)
    lib.pt_dequantize(DTYPES[dtype], _ptr(raw, "void *"), rows, cols, _ptr(out))
    return out


# GGUF's other block types, decoded to float by kernels/gguf_quants.c: name -> GGUF's (ggml.h) type code
GGUF_DECODED = {"Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14,
                "IQ4_NL": 20, "IQ4_XS": 23}
PT_GGUF = 32                 # a pt_tensor's dtype for them: PT_GGUF + the type code (kernels/internal.h)
DTYPES.update({name.lower(): PT_GGUF + code for name, code in GGUF_DECODED.items()})


def gguf_fast_types() -> set[str]:
    """The GGUF block types the active kernel path multiplies with SIMD kernels, as stored (e.g. Q4_K on AVX2)."""
    bits = lib.pt_gguf_fast()
    return {name for name, code in GGUF_DECODED.items() if bits >> code & 1}


def gguf_simd_types() -> set[str]:
    """The GGUF block types the active kernel path has SIMD kernels for (a superset of gguf_fast_types: Q4_1, Q5_0,
    Q5_1 and IQ4_NL on x86 too, which it runs faster decoded to q8_0, and smaller as stored)."""
    bits = lib.pt_gguf_simd()
    return {name for name, code in GGUF_DECODED.items() if bits >> code & 1}


def gguf_decode_reason(isa: str | None = None) -> str:
    """Why a load decodes the GGUF types the path has SIMD kernels for (gguf_simd_types - gguf_fast_types) to q8_0,
    as the load's note says it: measured on x86; on NEON (isa "neon") not measured on ARM hardware yet."""
    if (isa or ISA_NAMES[lib.pt_isa()]) == "neon":
        why = "its NEON kernels for them are not yet measured against q8_0's on ARM hardware"
    else:
        why = "it runs them faster so"
    return why + "; petit.load(..., gguf_stored=True) keeps them as stored, in less memory"


def gguf_decodes(gguf_type: str) -> bool:
    """Whether `dequantize_gguf` decodes tensors of this GGUF type."""
    return gguf_type in GGUF_DECODED


def dequantize_gguf(raw: np.ndarray, gguf_type: str, shape: tuple[int, int]) -> np.ndarray:
    """Decode raw rows of a GGUF block type (Q4_1 ... IQ4_XS) to float32 of `shape`, as llama.cpp decodes them."""
    if gguf_type not in GGUF_DECODED:
        raise ValueError(f"cannot decode GGUF type {gguf_type!r} (decodes {', '.join(GGUF_DECODED)})")
    rows, cols = int(shape[0]), int(shape[1])
    code = GGUF_DECODED[gguf_type]
    rb = lib.pt_gguf_row_bytes(code, cols)
    if rb < 0:
        raise ValueError(f"a row of {cols} values is not a whole number of {gguf_type} blocks")
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    if raw.size != rows * rb:
        raise ValueError(f"{raw.size} bytes do not hold a {gguf_type} tensor of shape {shape} ({rows * rb} expected)")
    out = np.empty((rows, cols), dtype=np.float32)
    lib.pt_dequantize_gguf(code, _ptr(raw, "void *"), rows, cols, _ptr(out))
    return out


EXACT_Q8 = ("Q5_0", "IQ4_NL")      # GGUF types whose values q8_0 holds exactly (gguf_to_q8_0)


def gguf_to_q8_0(raw: np.ndarray, gguf_type: str, shape: tuple[int, int]) -> np.ndarray:
    """Rows of Q5_0 or IQ4_NL as q8_0 rows with the same values, bit for bit (the block's d kept, its integers as the
    quants): uint8 [rows, row_bytes("q8_0", cols)]."""
    if gguf_type not in EXACT_Q8:
        raise ValueError(f"{gguf_type} values do not fit q8_0 exactly (only {', '.join(EXACT_Q8)} do)")
    rows, cols = int(shape[0]), int(shape[1])
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    rb = lib.pt_gguf_row_bytes(GGUF_DECODED[gguf_type], cols)
    if rb < 0 or raw.size != rows * rb:
        raise ValueError(f"{raw.size} bytes do not hold a {gguf_type} tensor of shape {shape}")
    out = weight_buffer(rows, row_bytes("q8_0", cols))
    lib.pt_gguf_to_q8_0(GGUF_DECODED[gguf_type], _ptr(raw, "void *"), rows, cols, _ptr(out, "void *"))
    return out


class Weight:
    """A weight matrix as the kernels see it: a pointer into (mapped) memory, a dtype and a shape. No copy.

    Attributes:
        c: the `pt_tensor *` handed to every kernel call (built once here).
        interleaved: the q8_0 / q4_0 rows are regrouped 8 at a time (`interleave`), as the x86 kernels read them
            fastest; `dtype` names the block type either way.
    """

    def __init__(self, raw: np.ndarray, dtype: str, shape: tuple[int, int], interleaved: bool = False):
        rows, cols = int(shape[0]), int(shape[1])
        rb = row_bytes(dtype, cols)
        if raw.nbytes != rows * rb:
            raise ValueError(f"{raw.nbytes} bytes do not hold a {dtype} matrix of shape {shape} ({rows * rb} expected)")
        if not raw.flags.c_contiguous:
            raise ValueError("weight data must be contiguous")
        if interleaved and dtype not in INTERLEAVED:
            raise ValueError(f"only q8_0 and q4_0 matrices are interleaved, not {dtype}")
        self.raw, self.dtype, self.shape, self.interleaved = raw, dtype, (rows, cols), interleaved
        self._buf = ffi.from_buffer(raw)     # keeps the mapping alive as long as this Weight
        code = INTERLEAVED[dtype] if interleaved else DTYPES[dtype]
        self.c = ffi.new("pt_tensor *", {"data": self._buf, "dtype": code, "rows": rows, "cols": cols})

    @classmethod
    def from_float(cls, w: np.ndarray, dtype: str) -> "Weight":
        w = _f32(w, "weight", 2)
        return cls(quantize(w, dtype), dtype, w.shape)

    def interleave(self, out: np.ndarray | None = None, done=None, slice_bytes: int = 16 << 20) -> "Weight":
        """This q8_0 / q4_0 matrix with its rows interleaved in groups of 8 (the rows after the last group stay
        plain): the same values, the same products bit for bit, the same size. Its bytes go into `out`, a writable
        contiguous uint8 array of raw.nbytes, or, with None, over raw itself (which must be writable; this Weight
        must not be used afterwards). done(r0, r1), when given, is called as each slice of rows (about slice_bytes)
        is converted, so a caller can let go of the source rows as it goes."""
        if self.dtype not in INTERLEAVED or self.interleaved:
            which = "an interleaved" if self.interleaved else "a"
            raise ValueError(f"{which} {self.dtype} matrix cannot be interleaved")
        dst = self.raw if out is None else out
        if dst.nbytes != self.raw.nbytes or not dst.flags.c_contiguous or not dst.flags.writeable:
            raise ValueError(f"out must be a writable contiguous array of {self.raw.nbytes} bytes")
        dst = dst.view(np.uint8).reshape(self.raw.shape)
        rows, cols = self.shape
        rb = row_bytes(self.dtype, cols)
        step = rows if done is None else max(8, slice_bytes // rb // 8 * 8)    # groups are whole in every slice
        src, out_p = ffi.cast("uint8_t *", self._buf), ffi.cast("uint8_t *", _out(dst, "void *"))
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            if lib.pt_interleave(DTYPES[self.dtype], src + r0 * rb, out_p + r0 * rb, r1 - r0, cols) != 0:
                raise MemoryError(f"could not interleave a {self.dtype} matrix of shape {self.shape}")
            if done is not None:
                done(r0, r1)
        return Weight(dst, self.dtype, self.shape, interleaved=True)

    def stored(self) -> np.ndarray:
        """The bytes in the plain row layout files hold: raw itself, or a plain copy of an interleaved matrix."""
        if not self.interleaved:
            return self.raw
        out = np.empty_like(self.raw, dtype=np.uint8)
        lib.pt_deinterleave(DTYPES[self.dtype], self._buf, _out(out, "void *"), *self.shape)
        return out

    def dequantize(self) -> np.ndarray:
        rows, cols = self.shape
        out = np.empty((rows, cols), dtype=np.float32)
        lib.pt_dequantize(self.c.dtype, self._buf, rows, cols, _ptr(out))
        return out


def matmul(W: Weight, x: np.ndarray, out: np.ndarray | None = None, accumulate: bool = False) -> np.ndarray:
    """y[t] = W @ x[t] for x [T, cols] (or [cols]); integer weights quantize x to q8 blocks on the fly."""
    x = _f32(x, "x")
    squeeze = x.ndim == 1
    x2 = x.reshape(1, -1) if squeeze else x
    if x2.ndim != 2 or x2.shape[1] != W.shape[1]:
        raise ValueError(f"x of shape {x.shape} does not match a weight of shape {W.shape}")
    T = x2.shape[0]
    if out is None:
        if accumulate:
            raise ValueError("accumulate=True needs an out array")
        out = np.empty((T, W.shape[0]), dtype=np.float32)
    elif (out.dtype != np.float32 or not out.flags.c_contiguous or not out.flags.writeable
          or out.size != T * W.shape[0]):
        raise ValueError(f"out must be a writable contiguous float32 array of {T}x{W.shape[0]} values")
    rc = lib.pt_matmul(W.c, _ptr(x2), T, _out(out), int(accumulate))
    if rc != 0:
        raise RuntimeError(f"pt_matmul failed ({rc})")
    return out.reshape(-1) if squeeze else out


def matmul_t(W: Weight, dy: np.ndarray, out: np.ndarray | None = None, accumulate: bool = False,
             reference: bool = False) -> np.ndarray:
    """dx[t] = W^T dy[t] for dy [T, rows]: the backward of `matmul` through W as stored (any type, quantized ones
    decoded a panel of rows at a time, never whole), for training adapters on a frozen base (issue 33). reference:
    the scalar C reference (tests)."""
    dy = _f32(dy, "dy", 2)
    if dy.shape[1] != W.shape[0]:
        raise ValueError(f"dy of shape {dy.shape} does not match a weight of shape {W.shape}")
    T = dy.shape[0]
    if out is None:
        if accumulate:
            raise ValueError("accumulate=True needs an out array")
        out = np.empty((T, W.shape[1]), dtype=np.float32)
    elif (out.dtype != np.float32 or not out.flags.c_contiguous or not out.flags.writeable
          or out.size != T * W.shape[1]):
        raise ValueError(f"out must be a writable contiguous float32 array of {T}x{W.shape[1]} values")
    rc = (lib.pt_matmul_t_ref if reference else lib.pt_matmul_t)(W.c, _ptr(dy), T, _out(out), int(accumulate))
    if rc != 0:
        raise RuntimeError(f"pt_matmul_t failed ({rc})")
    return out


def get_rows(W: Weight, ids) -> np.ndarray:
    """Rows `ids` of W decoded to float32 [len(ids), cols] (an embedding lookup)."""
    ids = np.ascontiguousarray(ids, np.int32)
    out = np.empty((len(ids), W.shape[1]), np.float32)
    if len(ids) and lib.pt_get_rows(W.c, _ptr(ids, "int32_t *"), len(ids), _out(out)) != 0:
        raise ValueError(f"token ids out of range for a table of {W.shape[0]} rows")
    return out


def quantize_act(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The on-the-fly activation format: int8 q [T, K], fp32 scales d [T, K/32], block sums s [T, K/32]."""
    x = _f32(x, "x", 2)
    T, K = x.shape
    row_bytes("q8_0", K)
    q = np.empty((T, K), np.int8)
    d = np.empty((T, K // BLOCK), np.float32)
    s = np.empty((T, K // BLOCK), np.int32)
    lib.pt_quantize_act(_ptr(x), T, K, _ptr(q, "int8_t *"), _ptr(d), _ptr(s, "int32_t *"))
    return q, d, s


def attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, pos0: int, scale: float,
              softcap: float = 0.0, window: int = 0, sinks: np.ndarray | None = None, chunk: int = 0,
              temperature: tuple[float, float] | None = None, alibi: np.ndarray | None = None,
              bidirectional: bool = False) -> np.ndarray:
    """Causal attention of q [T, n_heads, hd] at positions pos0.. over caches [n_kv, n_ctx, hd]; softcap > 0 caps
    the scores with tanh, window > 0 lets each query see only the last `window` positions (itself included);
    sinks [n_heads]: a softmax term per head whose share is dropped (gpt-oss); chunk > 0: each query sees only its
    own chunk of `chunk` positions; temperature (floor, a): scores x (1 + a ln(1 + floor((p + 1) / floor))) (Llama
    4), (floor, a, 1): floor(p / floor) (Ministral 3); alibi [n_heads]: ALiBi slopes, slope * (j - i) added to the
    scaled score of key j for the query at i; bidirectional: every query sees positions 0..pos0+T-1 (an encoder's
    attention, issue 35) instead of those up to its own."""
    q = _f32(q, "q", 3)
    k_cache, v_cache = _f32(k_cache, "k_cache", 3), _f32(v_cache, "v_cache", 3)
    T, H, hd = q.shape
    n_kv, n_ctx, _ = k_cache.shape
    if k_cache.shape != v_cache.shape or k_cache.shape[2] != hd or n_kv == 0 or H % n_kv:
        raise ValueError(f"bad attention shapes: q {q.shape}, k_cache {k_cache.shape}, v_cache {v_cache.shape}")
    for name in ("sinks", "alibi"):
        a = locals()[name]
        if a is not None and _f32(a, name, 1).shape != (H,):
            raise ValueError(f"bad attention {name}: {a.shape}, one per query head ({H}) expected")
    sinks = _f32(sinks, "sinks", 1) if sinks is not None else None
    alibi = _f32(alibi, "alibi", 1) if alibi is not None else None
    extra = attn_extra(sinks, chunk, temperature, alibi, bidirectional)
    out = np.empty_like(q)
    rc = lib.pt_attention(_ptr(q), _ptr(k_cache), _ptr(v_cache), n_ctx, T, H, n_kv, hd, pos0, scale, softcap,
                          window, extra, _ptr(out))
    if rc != 0:
        raise ValueError(f"bad attention shapes: q {q.shape}, cache {k_cache.shape}, pos0 {pos0}, window {window}, "
                         f"chunk {chunk}")
    return out


def attn_extra(sinks=None, chunk: int = 0, temperature: tuple[float, float] | None = None, alibi=None,
               bidirectional: bool = False):
    """The pt_attn_extra of these settings (NULL when none is set). sinks, alibi: float32 arrays or cffi pointers,
    which the caller keeps alive; bidirectional: an encoder's attention (every query sees the whole call)."""
    if sinks is None and not chunk and temperature is None and alibi is None and not bidirectional:
        return ffi.NULL
    e = ffi.new("pt_attn_extra *")
    e.bidirectional = int(bool(bidirectional))
    if sinks is not None:
        e.sinks = _ptr(sinks) if isinstance(sinks, np.ndarray) else sinks
    if alibi is not None:
        e.alibi = _ptr(alibi) if isinstance(alibi, np.ndarray) else alibi
    e.chunk = int(chunk)
    if temperature is not None:     # (floor, a) or (floor, a, at_p): at_p 1 floors p / floor (Ministral 3)
        e.temp_floor, e.temp_scale = temperature[:2]
        e.temp_at_p = int(temperature[2]) if len(temperature) > 2 else 0
    return e


ACTIVATIONS = {"none": 0, "silu": 1, "gelu_tanh": 2, "gelu": 3, "relu": 4, "relu2": 6}
GLU_ACTIVATIONS = dict(ACTIVATIONS, swiglu_oai=5, sigmoid=7)   # gated only: gpt-oss's clamped SwiGLU, a sigmoid gate


def norm(x: np.ndarray, w: np.ndarray | None, b: np.ndarray | None, eps: float, kind: str = "rms") -> np.ndarray:
    """RMSNorm (kind "rms") or LayerNorm ("layer") of each row of x [rows, D]; w and b are [D] or, for per-head
    weights, [w_rows, D] applied to row r as w[r % w_rows]."""
    x = _f32(x, "x", 2)
    w_rows = 1
    for name, a in (("w", w), ("b", b)):
        if a is not None and (a.shape[-1] != x.shape[1] or a.ndim > 2):
            raise ValueError(f"norm {name} of shape {a.shape} does not match x of shape {x.shape}")
        if a is not None and a.ndim == 2:
            w_rows = a.shape[0]
    w = None if w is None else _f32(w, "w")
    b = None if b is None else _f32(b, "b")
    y = np.empty_like(x)
    lib.pt_norm({"rms": 0, "layer": 1}[kind], _ptr(x), _ptr(w) if w is not None else ffi.NULL,
                _ptr(b) if b is not None else ffi.NULL, eps, x.shape[0], x.shape[1], w_rows, _ptr(y))
    return y


def bias_act(y: np.ndarray, b: np.ndarray | None, act: str) -> np.ndarray:
    """act(y + b) row-wise for y [T, N] (a new array)."""
    y = _f32(y, "y", 2).copy()
    if b is not None and b.shape != (y.shape[1],):
        raise ValueError(f"bias of shape {b.shape} does not match y of shape {y.shape}")
    b = None if b is None else _f32(b, "b")
    lib.pt_bias_act(_ptr(y), _ptr(b) if b is not None else ffi.NULL, y.shape[0], y.shape[1], ACTIVATIONS[act])
    return y


PARAM_ACTS = {"clamp": 0, "xielu": 1}


def param_act(y: np.ndarray, kind: str, params) -> np.ndarray:
    """An activation with parameters (pt_param_act): "clamp" (lo, hi), "xielu" (alpha_p, alpha_n, beta, eps)."""
    y = _f32(y, "y").copy()
    p = np.zeros(4, np.float32)
    p[:len(params)] = params
    if lib.pt_param_act(PARAM_ACTS[kind], _ptr(y), y.size, _ptr(p)) != 0:
        raise ValueError(f"unknown activation {kind!r}")
    return y


def glu(gate: np.ndarray, up: np.ndarray, act: str) -> np.ndarray:
    """act(gate) * up."""
    gate, up = _f32(gate, "gate"), _f32(up, "up")
    if gate.shape != up.shape:
        raise ValueError(f"gate {gate.shape} and up {up.shape} differ")
    out = np.empty_like(gate)
    lib.pt_glu(GLU_ACTIVATIONS[act], _ptr(gate), _ptr(up), gate.size, _ptr(out))
    return out


def rope_store(q: np.ndarray, k: np.ndarray, v: np.ndarray, pos0: int, cos: np.ndarray | None,
               sin: np.ndarray | None, interleaved: bool, k_cache: np.ndarray, v_cache: np.ndarray) -> None:
    """Rotate q [T, H, hd] in place; rotate k [T, n_kv, hd] into k_cache and copy v into v_cache ([n_kv, n_ctx, hd])
    at positions pos0 .. pos0+T-1. The tables [n_pos, rot/2] rotate the first `rot` values of each head (partial
    rotary when rot < hd); cos = sin = None stores without rotating (a layer without RoPE)."""
    for name, a in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if a.dtype != np.float32 or not a.flags.c_contiguous or not a.flags.writeable or a.ndim != 3:
            raise ValueError(f"{name} must be a writable contiguous 3-D float32 array (it is written in place)")
    k, v = _f32(k, "k", 3), _f32(v, "v", 3)
    T, H, hd = q.shape
    n_kv, n_ctx, _ = k_cache.shape
    if cos is None:
        rot, n_pos, cp, sp = 0, 0, ffi.NULL, ffi.NULL
    else:
        cos, sin = _f32(cos, "cos", 2), _f32(sin, "sin", 2)
        rot, n_pos, cp, sp = 2 * cos.shape[1], cos.shape[0], _ptr(cos), _ptr(sin)
        if cos.shape != sin.shape:
            raise ValueError(f"bad rope tables: {cos.shape} / {sin.shape}")
    if (k.shape != (T, n_kv, hd) or v.shape != k.shape or v_cache.shape != k_cache.shape or k_cache.shape[2] != hd
            or rot > hd):
        raise ValueError(f"bad rope shapes: q {q.shape}, k {k.shape}, v {v.shape}, caches {k_cache.shape} / "
                         f"{v_cache.shape}, rotating {rot} values")
    rc = lib.pt_rope_store(_out(q), _ptr(k), _ptr(v), T, H, n_kv, hd, rot, pos0, cp, sp, n_pos, int(interleaved),
                           _out(k_cache), _out(v_cache), n_ctx)
    if rc != 0:
        raise ValueError(f"positions {pos0}..{pos0 + T - 1} do not fit the cache ({n_ctx}) or table ({n_pos})")
