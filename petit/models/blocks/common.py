"""Builders shared by the families whose checkpoints use Llama's tensor names
(`model.layers.N.self_attn.q_proj`, `mlp.gate_proj`, `input_layernorm`, ...): most of them differ from Llama only in
a few switches, which these functions take as arguments."""
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm
from petit.models.blocks.rope import Rope


def norm(t, name: str, D: int, kind: str, eps: float, bias: bool = False, add: float = 0.0) -> Norm:
    return Norm(kind, eps, t.vec(name + ".weight", (D,), add=add), t.vec(name + ".bias", (D,)) if bias else None)


def attention_weights(t, p: str, cfg, *, qkv_bias=False, o_bias=False, prefix="self_attn.", heads=None) -> dict:
    """q, k, v, o projections (and biases) under `p + prefix`; `heads`: the layer's query heads when not the
    config's (issue 36, fam36g: Laguna's per-layer counts)."""
    D, hd = cfg.hidden_size, cfg.head_dim
    q, kv = (heads or cfg.num_attention_heads) * hd, cfg.num_key_value_heads * hd
    a = p + prefix
    w = {"q": t.weight(a + "q_proj.weight", (q, D)), "k": t.weight(a + "k_proj.weight", (kv, D)),
         "v": t.weight(a + "v_proj.weight", (kv, D)), "o": t.weight(a + "o_proj.weight", (D, q))}
    if qkv_bias:
        w.update(q_b=t.vec(a + "q_proj.bias", (q,)), k_b=t.vec(a + "k_proj.bias", (kv,)),
                 v_b=t.vec(a + "v_proj.bias", (kv,)))
    if o_bias:
        w["o_b"] = t.vec(a + "o_proj.bias", (D,))
    return w


def gated_mlp_weights(t, p: str, cfg, *, bias=False, prefix="mlp.") -> dict:
    D, F = cfg.hidden_size, cfg.intermediate_size
    m = p + prefix
    w = {"gate": t.weight(m + "gate_proj.weight", (F, D)), "up": t.weight(m + "up_proj.weight", (F, D)),
         "down": t.weight(m + "down_proj.weight", (D, F))}
    if bias:
        w.update(gate_b=t.vec(m + "gate_proj.bias", (F,)), up_b=t.vec(m + "up_proj.bias", (F,)),
                 down_b=t.vec(m + "down_proj.bias", (D,)))
    return w


def default_rope(cfg, dim: int | None = None, base: float | None = None, scaling="config",
                 interleaved: bool | None = None) -> Rope:
    """The config's RoPE; `interleaved` defaults to the config's own `rope_interleaved` (Petit's key, on every
    family built on LlamaConfig), so no family that inherits the field can ignore it."""
    if interleaved is None:
        interleaved = getattr(cfg, "rope_interleaved", False)
    return Rope(dim or cfg.head_dim, cfg.rope_theta if base is None else base,
                cfg.rope_scaling if scaling == "config" else scaling, cfg.max_position_embeddings,
                getattr(cfg, "original_max_position_embeddings", None), interleaved)


def embed_and_head(t, cfg, *, embed="model.embed_tokens.weight", head="lm_head.weight", tied=None):
    """The embedding and the LM head (the same Weight when tied)."""
    E = t.weight(embed, (cfg.vocab_size, cfg.hidden_size))
    tied = cfg.tie_word_embeddings if tied is None else tied
    return E, (E if tied else t.weight(head, (cfg.vocab_size, cfg.hidden_size)))


def arch(cfg, **kw) -> Arch:
    """The Arch of a config with Llama's field names; keyword arguments set the switches."""
    kw.setdefault("context_length", cfg.max_position_embeddings)
    kw.setdefault("intermediate_size", cfg.intermediate_size)       # the dense MLPs' width (their scratch)
    return Arch(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_attention_heads=cfg.num_attention_heads,
                num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim, **kw)


def llama_like(t, cfg, *, eps: float, kind: str = "rms", qkv_bias=False, o_bias=False, mlp_bias=False,
               norm_add: float = 0.0, rope_for=None, window_for=None, qk_norm: str | None = None,
               sandwich=False, post_only=False, moe_for=None, mlp_for=None, norm_weights=True, norm_bias=False,
               attn_norm_name="input_layernorm", mlp_norm_name="post_attention_layernorm", heads_for=None,
               **arch_kw) -> Decoder:
    """A Llama-named decoder.

    Args:
        eps, kind: the norms (rms or layer), norm_add: 1.0 for Gemma's (1 + w) weights.
        qkv_bias, o_bias, mlp_bias: which projections carry biases.
        rope_for(i) -> Rope | None, window_for(i) -> int: per-layer position encoding and sliding window
            (default: one RoPE for all, no window).
        qk_norm: None, "head" (q_norm/k_norm over each head: Qwen 3, Gemma 3) or "full" (over the row: OLMo 2).
        sandwich: post_attention_layernorm normalises the attention output, pre/post_feedforward_layernorm wrap the
            MLP (Gemma 2/3). post_only: only post-norms (OLMo 2).
        moe_for(i, prefix) -> Moe | None: routed experts in place of layer i's MLP (None: a dense MLP).
        mlp_for(i, prefix) -> dict: a dense layer's MLP weights (default: gated_mlp_weights of the config's width).
        attn_norm_name, mlp_norm_name: the pre-norms' tensor names (VaultGemma's MLP norm is pre_feedforward_layernorm).
        heads_for(i) -> int: layer i's query heads (issue 36, fam36g: Laguna's per-layer counts; the arch then holds
            the most, and a layer with fewer its own in Layer.heads).
        norm_bias: the block and final norms have biases too (Nemotron's LayerNorm1P).
        norm_weights: False for norms without weight or bias (OLMo's LayerNorm), read from no tensor.
        arch_kw: Arch switches (attn_scale, attn_softcap, embed_scale, logit_scale, ...).
    """
    D, hd = cfg.hidden_size, cfg.head_dim
    E, head = embed_and_head(t, cfg)
    if rope_for is None:
        rope = default_rope(cfg)
        rope_for = lambda i: rope                       # noqa: E731
        arch_kw.setdefault("context_length", rope.context_length)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        H = heads_for(i) if heads_for is not None else cfg.num_attention_heads
        attn = attention_weights(t, p, cfg, qkv_bias=qkv_bias, o_bias=o_bias, heads=H)   # asked for first: file order
        moe = moe_for(i, p) if moe_for is not None else None
        mlp = {"moe": moe} if moe is not None else mlp_for(i, p) if mlp_for is not None else \
            gated_mlp_weights(t, p, cfg, bias=mlp_bias)
        L = Layer(**attn, **mlp, rope=rope_for(i), window=window_for(i) if window_for else 0)
        n = lambda name: norm(t, p + name, D, kind, eps, norm_bias, norm_add) if norm_weights else Norm(kind, eps)  # noqa
        if post_only:
            L.post_attn_norm, L.post_mlp_norm = n("post_attention_layernorm"), n("post_feedforward_layernorm")
        elif sandwich:
            L.attn_norm, L.post_attn_norm = n("input_layernorm"), n("post_attention_layernorm")
            L.mlp_norm, L.post_mlp_norm = n("pre_feedforward_layernorm"), n("post_feedforward_layernorm")
        else:
            L.attn_norm, L.mlp_norm = n(attn_norm_name), n(mlp_norm_name)
        if qk_norm:
            width = hd if qk_norm == "head" else None
            L.q_norm = norm(t, p + "self_attn.q_norm", width or H * hd, kind, eps, add=norm_add)
            L.k_norm = norm(t, p + "self_attn.k_norm", width or cfg.num_key_value_heads * hd, kind, eps,
                            add=norm_add)
        L.heads = H
        layers.append(L)
    final = norm(t, "model.norm", D, kind, eps, norm_bias, norm_add) if norm_weights else Norm(kind, eps)
    a = arch(cfg, qk_norm_per_head=qk_norm != "full", **arch_kw)
    a.num_attention_heads = max(L.heads for L in layers)
    for L in layers:
        L.heads = L.heads if L.heads != a.num_attention_heads else 0
    return Decoder(a, E, layers, final, head)


LAYER_TYPES = ("full_attention", "sliding_attention")


def layer_types(cfg, derive) -> list[str]:
    """Each layer's attention kind: the config's `layer_types` when it has one, else `derive(i)` (the rule the
    family's transformers config applies)."""
    n = cfg.num_hidden_layers
    given = getattr(cfg, "layer_types", None)
    if given is None:
        return [derive(i) for i in range(n)]
    if not isinstance(given, list) or len(given) != n or any(t not in LAYER_TYPES for t in given):
        raise ValueError(f"config: layer_types must list {n} values of {' / '.join(LAYER_TYPES)}, got {given!r}")
    return given


def window_of(cfg, types: list[str]):
    """window_for(i): the sliding window of sliding layers, 0 for full ones."""
    w = getattr(cfg, "sliding_window", None)
    if any(t == "sliding_attention" for t in types) and (isinstance(w, bool) or not isinstance(w, int) or w <= 0):
        raise ValueError(f"config: sliding layers need a positive sliding_window, got {w!r}")
    return lambda i: w if types[i] == "sliding_attention" else 0


class Renamed:
    """A checkpoint seen under other names, `rename(stored name) -> name` (a conversion mapping transformers applies
    at load and undoes at save: issue 36, fam36m's Ling 3 and HY-V4), for a family's hf_tensors: f32 and `in` by the
    new names; `entries(derived)` maps derived entries' sources back to the stored names; `aliases(out)` adds an entry
    for each renamed tensor `out` does not derive."""

    def __init__(self, ckpt, rename):
        self.ckpt, self.stored = ckpt, {rename(n): n for n in ckpt.names()}

    def __contains__(self, name):
        return name in self.stored

    def f32(self, name):
        return self.ckpt.f32(self.stored[name])

    def entries(self, derived: dict) -> dict:
        return {k: (e[0], e[1], [self.stored.get(s, s) for s in e[2]], *e[3:]) for k, e in derived.items()}

    def aliases(self, out: dict) -> dict:
        for name, stored in self.stored.items():
            if name != stored and name not in out:
                out[name] = (tuple(self.ckpt.info(stored)[1]), lambda s=stored: self.ckpt.f32(s), [stored])
        return out
