"""The Llama decoder: token embedding; N x (RMSNorm -> grouped-query attention with RoPE and a KV cache ->
residual -> RMSNorm -> SwiGLU MLP -> residual); final RMSNorm; LM head, tied to the embedding or not.

The forward pass is a handful of C calls per layer. Every pointer it passes (weights, norms, scratch, cache) is
prepared once, when the model or its scratch is built, never per call.
"""
import dataclasses
import math
import threading
import warnings
from dataclasses import dataclass, field

import numpy as np

from petit.kernels import Weight, ffi, lib, rope_table

# keys a Llama config may carry that do not change the computation
_IGNORED_KEYS = {"model_type", "architectures", "torch_dtype", "dtype", "transformers_version", "bos_token_id",
                 "eos_token_id", "pad_token_id", "initializer_range", "use_cache", "hidden_act", "pretraining_tp",
                 "attention_dropout", "attention_bias", "mlp_bias", "rope_scaling"}


@dataclass
class LlamaConfig:
    """Hyperparameters, with Hugging Face's field names."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None = None      # None: same as num_attention_heads (no grouping)
    head_dim: int | None = None                 # None: hidden_size // num_attention_heads
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_interleaved: bool = False              # False: rotate-half pairs (i, i + hd/2); True: (2i, 2i+1)
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    model_type: str = "llama"
    unknown_keys: list = field(default_factory=list, repr=False)

    @classmethod
    def from_dict(cls, d: dict) -> "LlamaConfig":
        """Build and validate a config; unknown keys are kept in `unknown_keys` and warned about, and features
        this engine does not implement are errors.

        Raises:
            ValueError: a missing field, an unsupported feature, or inconsistent sizes, naming the values.
        """
        names = {f.name for f in dataclasses.fields(cls)} - {"unknown_keys"}
        hidden_act = d.get("hidden_act", "silu")
        if hidden_act not in ("silu", "swish"):
            raise ValueError(f"config: hidden_act {hidden_act!r} is not supported by the llama family (only silu)")
        if d.get("rope_scaling"):
            raise ValueError(f"config: rope_scaling {d['rope_scaling']!r} is not supported yet")
        for flag in ("attention_bias", "mlp_bias"):
            if d.get(flag):
                raise ValueError(f"config: {flag}=true is not supported by the llama family yet")
        missing = [n for n in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                               "num_attention_heads") if n not in d]
        if missing:
            raise ValueError(f"config: missing required field(s) {', '.join(missing)}")
        unknown = sorted(k for k in d if k not in names and k not in _IGNORED_KEYS)
        if unknown:
            warnings.warn(f"config: ignoring unknown key(s) {', '.join(unknown)}", stacklevel=2)
        cfg = cls(**{k: v for k, v in d.items() if k in names}, unknown_keys=unknown)
        cfg._validate()
        return cfg

    def _validate(self) -> None:
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "max_position_embeddings"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"config: {name} must be a positive integer, got {v!r}")
        if self.head_dim is not None and (isinstance(self.head_dim, bool) or not isinstance(self.head_dim, int)
                                          or self.head_dim <= 0):
            raise ValueError(f"config: head_dim must be a positive integer, got {self.head_dim!r}")
        for name in ("rms_norm_eps", "rope_theta"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"config: {name} must be a positive number, got {v!r}")
        for name in ("rope_interleaved", "tie_word_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"config: {name} must be true or false, got {getattr(self, name)!r}")
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(f"config: hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                                 f"{self.num_attention_heads}")
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"config: num_attention_heads {self.num_attention_heads} is not divisible by "
                             f"num_key_value_heads {self.num_key_value_heads}")
        if self.head_dim % 2:
            raise ValueError(f"config: head_dim {self.head_dim} must be even for RoPE")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("unknown_keys")
        return d


def tensor_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a Llama checkpoint must hold, with its shape ([out_features, in_features] for matrices)."""
    D, F, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * hd, cfg.num_key_value_heads * hd
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, D)}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (D,),
            p + "self_attn.q_proj.weight": (q, D),
            p + "self_attn.k_proj.weight": (kv, D),
            p + "self_attn.v_proj.weight": (kv, D),
            p + "self_attn.o_proj.weight": (D, q),
            p + "post_attention_layernorm.weight": (D,),
            p + "mlp.gate_proj.weight": (F, D),
            p + "mlp.up_proj.weight": (F, D),
            p + "mlp.down_proj.weight": (D, F),
        })
    shapes["model.norm.weight"] = (D,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, D)
    return shapes


def _fptr(a: np.ndarray):
    return ffi.cast("float *", ffi.from_buffer(a))


class _Scratch:
    """Activation buffers for up to `cap` tokens at once, with their C pointers."""

    def __init__(self, cfg: LlamaConfig, cap: int):
        D, F, hd = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
        self.cap = cap
        self.ids = np.zeros(cap, np.int32)
        self.ids_p = ffi.cast("int32_t *", ffi.from_buffer(self.ids))
        shapes = {"x": D, "xn": D, "q": cfg.num_attention_heads * hd, "k": cfg.num_key_value_heads * hd,
                  "v": cfg.num_key_value_heads * hd, "att": cfg.num_attention_heads * hd, "g": F, "u": F, "h": F}
        self.arrays = {n: np.zeros((cap, w), np.float32) for n, w in shapes.items()}
        self.p = {n: _fptr(a) for n, a in self.arrays.items()}


class LlamaModel:
    """The forward pass over weights given as zero-copy views.

    Args:
        cfg: the validated config.
        tensor: name -> (raw uint8 view, dtype, shape) for every name in `tensor_shapes(cfg)`; norms must be f32.
    """

    def __init__(self, cfg: LlamaConfig, tensor):
        self.cfg = cfg
        self._keep = []              # arrays whose memory the C pointers point into
        self.embed = Weight(*tensor("model.embed_tokens.weight"))
        self.layers = []
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            W = {n: Weight(*tensor(p + n + ".weight")) for n in (
                "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")}
            W["input_layernorm"] = self._norm(tensor, p + "input_layernorm.weight")
            W["post_attention_layernorm"] = self._norm(tensor, p + "post_attention_layernorm.weight")
            self.layers.append(W)
        self.norm = self._norm(tensor, "model.norm.weight")
        self.lm_head = self.embed if cfg.tie_word_embeddings else Weight(*tensor("lm_head.weight"))
        self._rope_n = 0                 # the RoPE table grows with the longest cache used, not the model's limit
        self._scratch = None
        self._lock = threading.Lock()    # one forward pass at a time: the scratch buffers are shared

    def _ensure_rope(self, n_pos: int) -> None:
        if n_pos > self._rope_n:
            n = min(self.cfg.max_position_embeddings, max(n_pos, 2 * self._rope_n, 256))
            self.cos, self.sin = rope_table(self.cfg.rope_theta, self.cfg.head_dim, n)
            self._cos_p, self._sin_p = _fptr(self.cos), _fptr(self.sin)
            self._rope_n = n

    def _norm(self, tensor, name: str):
        raw, dtype, shape = tensor(name)
        if dtype != "f32":
            raise ValueError(f"tensor {name!r}: norm weights must be f32, found {dtype}")
        arr = raw.view(np.float32)
        self._keep.append(arr)
        return _fptr(arr)

    def scratch(self, T: int) -> _Scratch:
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _Scratch(self.cfg, max(T, 16))
        return self._scratch

    def forward(self, ids, cache, logits_out: np.ndarray | None = None) -> None:
        """Run tokens `ids` at positions cache.pos .. cache.pos+T-1, append them to the cache, and write the logits
        of every position into logits_out [T, vocab] (or skip the head when logits_out is None)."""
        with self._lock:
            self._forward(ids, cache, logits_out)

    def _forward(self, ids, cache, logits_out) -> None:
        cfg, T = self.cfg, len(ids)
        H, KV, hd, D, F = (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size,
                           cfg.intermediate_size)
        layout = (cfg.num_hidden_layers, KV, cache.n_ctx, hd)
        if cache.layout != layout or cache.n_ctx > cfg.max_position_embeddings:
            raise ValueError(f"this KV cache {cache.layout} was not made for this model (needs {layout[:2]} + "
                             f"(n_ctx <= {cfg.max_position_embeddings}, {hd})): use model.new_cache()")
        pos0 = cache.pos
        if pos0 + T > cache.n_ctx:
            raise ValueError(f"context full: {pos0} + {T} tokens exceed the cache size {cache.n_ctx}")
        self._ensure_rope(pos0 + T)
        s = self.scratch(T)
        s.ids[:T] = ids
        p, eps, scale = s.p, cfg.rms_norm_eps, hd ** -0.5
        if lib.pt_get_rows(self.embed.c, s.ids_p, T, p["x"]) != 0:
            bad = [int(t) for t in ids if not 0 <= t < cfg.vocab_size]
            raise ValueError(f"token id(s) {bad[:5]} out of range for a vocabulary of {cfg.vocab_size}")
        rc = 0                               # the C calls return 0, or < 0 on a bad argument; checked once per layer
        int8_kv = cache.kv_type == "int8"
        for layer, L in enumerate(self.layers):
            kc, vc = cache.k_ptr[layer], cache.v_ptr[layer]
            lib.pt_rmsnorm(p["x"], L["input_layernorm"], eps, T, D, p["xn"])
            rc |= lib.pt_matmul3(L["self_attn.q_proj"].c, L["self_attn.k_proj"].c, L["self_attn.v_proj"].c,
                                 p["xn"], T, p["q"], p["k"], p["v"])
            if int8_kv:
                ks, vs = cache.ks_ptr[layer], cache.vs_ptr[layer]
                rc |= lib.pt_rope_store_q8(p["q"], p["k"], p["v"], T, H, KV, hd, pos0, self._cos_p, self._sin_p,
                                           self._rope_n, int(cfg.rope_interleaved), kc, ks, vc, vs, cache.n_ctx)
                rc |= lib.pt_attention_q8(p["q"], kc, ks, vc, vs, cache.n_ctx, T, H, KV, hd, pos0, scale, p["att"])
            else:
                rc |= lib.pt_rope_store(p["q"], p["k"], p["v"], T, H, KV, hd, pos0, self._cos_p, self._sin_p,
                                        self._rope_n, int(cfg.rope_interleaved), kc, vc, cache.n_ctx)
                rc |= lib.pt_attention(p["q"], kc, vc, cache.n_ctx, T, H, KV, hd, pos0, scale, p["att"])
            rc |= lib.pt_matmul(L["self_attn.o_proj"].c, p["att"], T, p["x"], 1)
            lib.pt_rmsnorm(p["x"], L["post_attention_layernorm"], eps, T, D, p["xn"])
            rc |= lib.pt_matmul3(L["mlp.gate_proj"].c, L["mlp.up_proj"].c, ffi.NULL, p["xn"], T, p["g"], p["u"],
                                 ffi.NULL)
            lib.pt_swiglu(p["g"], p["u"], T * F, p["h"])
            rc |= lib.pt_matmul(L["mlp.down_proj"].c, p["h"], T, p["x"], 1)
            if rc:
                raise RuntimeError(f"kernel error {rc} in layer {layer} (positions {pos0}..{pos0 + T - 1})")
        cache.pos = pos0 + T
        if logits_out is not None:
            n = logits_out.shape[0]             # the last n positions
            first = p["x"] + (T - n) * D
            lib.pt_rmsnorm(first, self.norm, eps, n, D, p["xn"])
            if lib.pt_matmul(self.lm_head.c, p["xn"], n, _fptr(logits_out), 0):
                raise RuntimeError("kernel error in the LM head")


# the names petit.model uses for any family
Config = LlamaConfig
Network = LlamaModel
