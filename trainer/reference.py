"""An independent float64 Llama forward over a `.petit` file, the yardstick `petit verify` holds the engine to.

It shares no code with the engine: the header and tensor table are parsed here with `struct`, the tensors are
read with `np.frombuffer` over an `mmap` and every block type (f32, f16, bf16, q8_0, q4_0) is decoded here, as
`docs/petit-format.md` describes it. It takes token ids (no tokenizer) and runs the whole sequence at once with
a causal mask, no cache, every product in float64 on the weights exactly as stored. By default activations are
not rounded, so for q8_0 / q4_0 files it differs from the engine, whose integer kernels round every matmul input
to int8 blocks; `round_activations=True` applies that rounding (per 32 values an fp32 scale max|x| / 127 and
int8 values) before each product with a q8_0 / q4_0 matrix, leaving little more than float rounding between them.

    ref = Reference("model.petit")
    logits = ref.logits([1, 2, 3])           # float64 [3, vocab]
"""
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


class Reference:
    """A `.petit` llama model, read and run independently of the engine.

    Attributes:
        config: the metadata's `config` dict (Hugging Face names).
        metadata: the whole metadata dict.
        tensors: name -> (dtype, shape, absolute byte offset, nbytes).

    Raises (from __init__):
        ValueError: not a readable version-1 `.petit` file, or a tensor a llama model needs is missing.
        OSError: the file cannot be opened.
    """

    def __init__(self, path, round_activations: bool = False):
        self.path, self.round_activations = str(path), round_activations
        with open(self.path, "rb") as f:
            if f.read(8) != MAGIC:
                raise ValueError(f"{self.path}: not a .petit file (it does not start with {MAGIC!r})")
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._parse()
        except (KeyError, TypeError, struct.error, UnicodeDecodeError, json.JSONDecodeError) as e:
            self.close()
            raise ValueError(f"{self.path}: cannot be read as a llama model ({type(e).__name__}: {e})") from None
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
        c = self.config
        self.H, self.L = c["num_attention_heads"], c["num_hidden_layers"]
        self.KV = c.get("num_key_value_heads") or self.H
        self.hd = c.get("head_dim") or c["hidden_size"] // self.H
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.theta = c.get("rope_theta", 10000.0)
        self.interleaved = bool(c.get("rope_interleaved", False))
        self.tied = bool(c.get("tie_word_embeddings", False))
        need = ["model.embed_tokens.weight", "model.norm.weight"] + ([] if self.tied else ["lm_head.weight"])
        missing = [n for n in need if n not in self.tensors]
        if missing:
            raise ValueError(f"{self.path}: tensor(s) {', '.join(missing)} missing")

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

    def matmul(self, h: np.ndarray, name: str) -> np.ndarray:
        """h @ W.T for the matrix `name` ([out, in]); h rounded first if asked and W is q8_0 / q4_0."""
        w = self.weight(name)
        if self.round_activations and self.tensors[name][0] in BLOCK_BYTES:
            h = round_to_int8_blocks(h)
        return h @ w.T

    def close(self) -> None:
        """Unmap the file (if raw() views are still alive, the mapping goes when they do)."""
        try:
            self._mm.close()
        except BufferError:
            pass

    def rmsnorm(self, x: np.ndarray, name: str) -> np.ndarray:
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * self.weight(name)

    def rope(self, x: np.ndarray) -> np.ndarray:
        """Rotate x [T, heads, hd] by position: pairs (i, i + hd/2), or (2i, 2i+1) when interleaved."""
        T, hd = x.shape[0], self.hd
        inv_freq = self.theta ** (-2.0 * np.arange(hd // 2) / hd)
        angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]     # [T, hd/2]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        a, b = (x[..., 0::2], x[..., 1::2]) if self.interleaved else (x[..., :hd // 2], x[..., hd // 2:])
        ra, rb = a * cos - b * sin, b * cos + a * sin
        out = np.empty_like(x)
        if self.interleaved:
            out[..., 0::2], out[..., 1::2] = ra, rb
        else:
            out[..., :hd // 2], out[..., hd // 2:] = ra, rb
        return out

    def attention(self, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Causal softmax attention; query head h reads key/value head h // (H / KV)."""
        T = q.shape[0]
        kv_of = np.arange(self.H) // (self.H // self.KV)
        k, v = k[:, kv_of], v[:, kv_of]                                        # [T, H, hd]
        scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(self.hd)             # [H, T, T]
        scores[:, np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
        p = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        return np.einsum("hts,shd->thd", p, v).reshape(T, self.H * self.hd)

    def logits(self, ids) -> np.ndarray:
        """The float64 logits [len(ids), vocab] of every position of the token sequence `ids`."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        vocab = self.tensors["model.embed_tokens.weight"][1][0]
        if ids.size == 0 or ids.min() < 0 or ids.max() >= vocab:
            raise ValueError(f"token ids must be a non-empty sequence in 0..{vocab - 1}")
        T, W, mm = len(ids), self.weight, self.matmul
        x = W("model.embed_tokens.weight")[ids]
        for i in range(self.L):
            p = f"model.layers.{i}."
            h = self.rmsnorm(x, p + "input_layernorm.weight")
            q = self.rope(mm(h, p + "self_attn.q_proj.weight").reshape(T, self.H, self.hd))
            k = self.rope(mm(h, p + "self_attn.k_proj.weight").reshape(T, self.KV, self.hd))
            v = mm(h, p + "self_attn.v_proj.weight").reshape(T, self.KV, self.hd)
            x = x + mm(self.attention(q, k, v), p + "self_attn.o_proj.weight")
            h2 = self.rmsnorm(x, p + "post_attention_layernorm.weight")
            g, u = mm(h2, p + "mlp.gate_proj.weight"), mm(h2, p + "mlp.up_proj.weight")
            silu = g * (0.5 + 0.5 * np.tanh(0.5 * g))                          # g * sigmoid(g), no overflow
            x = x + mm(silu * u, p + "mlp.down_proj.weight")
        head = "model.embed_tokens.weight" if self.tied else "lm_head.weight"
        return mm(self.rmsnorm(x, "model.norm.weight"), head)
