"""Qwen4-Exp's hashed n-gram Per-Layer Embeddings (PLE; the family: petit/models/families/hybrid/qwen4_exp_text.py), on
the `linear_attention` layers `ple_layer_ids` lists (one-indexed), added to the streams before the layer's first gated
residual:

- each token's n-grams of orders 2..`ngram_size` (itself and the tokens before it, eos past a document's start),
  hashed by odd 64-bit multipliers drawn for the layer (SplitMix64 from `seed` + 10007 x the PLE layer's index) and
  XOR, index `heads_per_ngram` heads per order, each of a prime vocabulary (the consecutive primes from
  `ngram_vocab_size_base`, one per head of every PLE layer in turn) in one table of `ple_embed_dim` / heads values a
  row, stored as `split_ngram_parts` shards (`ngram_embedding.shard_{k}`) or whole: the rows are gathered from the
  shards as stored (a `.petit` file's or a load kept as stored maps them: only the looked-up rows are read), the
  table's size is no matter (~45 billion rows in the release);
- the embedding's keys (key_proj, RMS-normed per stream: norm_key) and value (value_proj) gate each stream by
  sigmoid(signed sqrt(kn_j . norm_query(X)_j / sqrt(D))); the gated values, RMS-normed (norm_conv), pass a causal
  depthwise conv of `ple_conv_kernel_size` taps `ngram_size` positions apart and a silu, and X_j += gated value +
  that (kernels/q4x_ple.c: PLE_NGRAM, PLE_MIX).

A sequence's last ids and the conv's (taps - 1) x ngram_size positions live in a recurrent-state slot of their own
(its conv and scan regions), so rewinding to a snapshot stays exact."""
import numpy as np

from petit.models.blocks.decoder import Norm, Vec
from petit.native import ffi, lib
from petit.models.families.hybrid.qwen4_exp_ngram import multipliers, vocabularies

NGRAM_MAX = 16                  # kernels/api.h's PT_NGRAM_MAX
TABLE = "ple.ple_embedding.ngram_embedding."
UNREAD = ("ple_embedding.layer_multipliers", "ple_embedding.ngram_heads_vocab_sizes",
          "ple_embedding.ngram_heads_offsets")     # transformers' buffers, derived from the config here


def check_buffers(cfg, ckpt) -> None:
    """transformers loads each PLE layer's multipliers, vocabularies and offsets from the checkpoint when it holds
    them (they are buffers it saves); Petit derives them from the config, so a checkpoint whose buffers differ from
    the config's is refused."""
    for j, i in enumerate(cfg.ple_layer_ids):
        p = f"model.layers.{i - 1}.ple.ple_embedding."
        sizes, offsets, _ = vocabularies(cfg, j)
        mult = [m - (1 << 64) if m >> 63 else m for m in multipliers(cfg, j)]
        for name, want in (("layer_multipliers", mult), ("ngram_heads_vocab_sizes", sizes),
                           ("ngram_heads_offsets", offsets)):
            if p + name in ckpt and np.asarray(ckpt.raw(p + name)).view(np.int64).ravel().tolist() != want:
                raise ValueError(f"{p}{name}: the checkpoint's values are not those its config (seed, vocab_size, "
                                 "ngram_size, heads_per_ngram, ngram_vocab_size_base) gives")


def check(cfg) -> None:
    """The PLE settings the kernels run (a config's _validate, with ple_layer_ids)."""
    n, L = cfg.num_hidden_layers, cfg.ple_layer_ids
    if any(not isinstance(i, int) or not 1 <= i <= n or cfg.types[i - 1] != "linear_attention" for i in L):
        raise ValueError(f"config: ple_layer_ids must be one-indexed linear_attention layers in 1..{n}, got {L}")
    heads = (cfg.ngram_size - 1) * cfg.heads_per_ngram
    if not 2 <= cfg.ngram_size <= NGRAM_MAX or cfg.heads_per_ngram < 1 or cfg.ple_embed_dim % heads:
        raise ValueError(f"config: ngram_size must be in 2..{NGRAM_MAX} and ple_embed_dim ({cfg.ple_embed_dim}) a "
                         f"multiple of (ngram_size - 1) x heads_per_ngram ({heads})")
    if cfg.ple_eos is None or cfg.vocab_size > 1 << 24:
        raise ValueError("config: PLE layers need eos_token_id, and a vocabulary under 2^24 ids (a sequence's last "
                         "ids are kept as float32)")
    need = (cfg.ple_conv_kernel_size - 1) * cfg.ngram_size * cfg.hc_count * cfg.hidden_size
    room = cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim
    if cfg.ple_conv_kernel_size < 1 or need > room:
        raise ValueError(f"config: the PLE conv's state ({need} values: (ple_conv_kernel_size - 1) x ngram_size x "
                         f"hc_count x hidden_size) must fit a linear-attention layer's recurrent state ({room})")


def grouped(t, name: str, n: int, D: int, eps: float) -> Norm:
    """An RMSNorm over each of n streams of D values, x (1 + w) with w [n D] (Qwen4-Exp's grouped norms)."""
    return Norm("rms", eps, Vec(1.0 + t.array(name + ".weight", (n * D,)).reshape(n, D)))


class Ple:
    """One PLE layer's weights and its two kernel records; `slot` the cache slot of its state."""

    def __init__(self, cfg, t, p: str, index: int, slot: int):
        n, D, E, N, eps = cfg.hc_count, cfg.hidden_size, cfg.ple_embed_dim, cfg.ngram_size, cfg.rms_norm_eps
        heads = (N - 1) * cfg.heads_per_ngram
        sizes, offsets, rows = vocabularies(cfg, index)
        whole = p + TABLE + "weight"
        names = [whole] if t.has(whole) else [p + TABLE + f"shard_{k}.weight" for k in range(cfg.split_ngram_parts)]
        shapes = [tuple(t.info(m)[1]) if t.has(m) else (0, E // heads) for m in names]
        if max(s[0] for s in shapes) >= 1 << 31:      # the kernel's row in a shard is an int32
            raise ValueError(f"{p}{TABLE}: a shard of 2^31 rows or more (the table's {rows} rows in {len(names)}); "
                             "split_ngram_parts shards of fewer rows are read")
        if sum(s[0] for s in shapes) != rows:
            raise ValueError(f"{p}{TABLE}: {sum(s[0] for s in shapes)} rows in {len(names)} shard(s), expected {rows}")
        self.shards = [t.weight(m, s) for m, s in zip(names, shapes)]
        self.key, self.value = t.weight(p + "ple.key_proj.weight", (n * D, E)), t.weight(p + "ple.value_proj.weight",
                                                                                        (D, E))
        self.norm_key, self.norm_query, self.norm_conv = (grouped(t, p + f"ple.{m}", n, D, eps) for m in
                                                          ("norm_key", "norm_query", "norm_conv"))
        K = cfg.ple_conv_kernel_size
        self.conv = t.array(p + "ple.conv1d.weight", (n * D, 1, K)).reshape(n * D, K)
        self.slot, self.width = slot, E
        self._keep = [np.asarray(multipliers(cfg, index), np.uint64).view(np.int64), np.asarray(sizes, np.int64),
                      np.asarray(offsets, np.int64), np.cumsum([0] + [s[0] for s in shapes]).astype(np.int64),
                      np.ascontiguousarray(self.conv, np.float32)]
        g = self.ngram = ffi.new("pt_ngram *")
        g.n, g.heads, g.dim, g.eos, g.n_shards = N, cfg.heads_per_ngram, E // heads, cfg.ple_eos, len(names)
        g.mult, g.vocab, g.offset, g.start = (ffi.cast("int64_t *", ffi.from_buffer(a)) for a in self._keep[:4])
        self._shards = ffi.new("pt_tensor *[]", [w.c for w in self.shards])
        g.shards = self._shards
        m = self.mix = ffi.new("pt_plemix *")
        m.n, m.D, m.K, m.dil, m.eps = n, D, K, N, eps
        m.norm_w, m.conv_w = self.norm_conv.w.p, ffi.cast("float *", ffi.from_buffer(self._keep[4]))

    def matrices(self) -> list:
        return [self.key, self.value]

    def replace(self, new: dict) -> None:
        self.key, self.value = new.get(id(self.key), self.key), new.get(id(self.value), self.value)

    def norms(self) -> list:
        return [self.norm_key, self.norm_query, self.norm_conv]

    def plan(self, s, i: int, X, b) -> None:
        """The ops adding this layer's PLE into the streams X (b: the scratch's pointers)."""
        n, D = self.mix.n, self.mix.D
        self.mix.eps = self.norm_conv.eps       # the Norm's, as a test fault may have changed it
        s._add(lib.PT_OP_PLE_NGRAM, i, y=[b["ple_e"], ffi.NULL, ffi.NULL], ngram=self.ngram, cache_slot=self.slot)
        s.matmul(i, [self.key, self.value], b["ple_e"], [b["ple_k"], b["ple_v"]])
        s.norm(i, self.norm_key, b["ple_k"], n, D, b["ple_k"])
        s.norm(i, self.norm_query, X, n, D, b["ple_q"])
        s._add(lib.PT_OP_PLE_MIX, i, x=b["ple_k"], x2=b["ple_v"], y=[X, b["ple_q"], ffi.NULL], ple=self.mix,
               cache_slot=self.slot)

