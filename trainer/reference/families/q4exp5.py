"""The q4exp group of issue 36, written from transformers 5.25's modeling_qwen4_exp.py: qwen4_exp_text (and qwen4_exp,
its released multimodal wrapper as Petit converts it). Qwen3.5-MoE's layers (trainer/reference/families/hybrid.py's
qwen3_next spec, norm_topk_prob read) without their norms, inside hyper-connections, in a forward of its own:

- the residual X is hc_count streams (the embedding repeated); before each block hn = each stream RMS-normed x
  (1 + hc_norm), g = sigmoid(up silu(down hn / n)), the block reads mean_j g_j hn_j and its output y makes the streams
  X_j + 2 sigmoid(inject hn / n)_j y; the output is that mix once more (hyper_connection_mixer), then lm_head;
- the attention layers' QSA indexer (LayerSpec.keep): per query, the positions of its top indexer_budget /
  indexer_compress_ratio complete blocks (by sum_h relu(q_h . k_b) / sqrt(dim); q = q_layernorm(index_q h) roped as
  the heads, k_b = k_layernorm(the block's mean raw key, index_k h) roped at the block's first position; all of them
  when no more) and of the incomplete last block.
- the PLE layers' hashed n-gram embeddings gating each stream, through a dilated causal conv (_ple)."""
import numpy as np

from trainer.reference import ops
from trainer.reference.families.common import get
from trainer.reference.families.hybrid import qwen3_next

FAMILIES = {}


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1.0 + w)


def _qsa_keep(cfg, p: str):
    H, d, c = cfg["indexer_n_heads"], cfg["indexer_head_dim"], cfg["indexer_compress_ratio"]
    top, eps = cfg["indexer_budget"] // c, get(cfg, "rms_norm_eps", 1e-6)

    def keep(f, L, h, heads):
        T = h.shape[0]
        inv, factor = L.rope.freqs(T)
        iq = _rms(f.mm(h, p + "index_q.weight").reshape(T, H, d), f.w(p + "q_layernorm.weight"), eps)
        iq = ops.rotate(iq, L.rope.dim, inv, factor, False)
        raw = f.mm(h, p + "index_k.weight")
        nb_all = T // c
        kb = _rms(raw[:nb_all * c].reshape(nb_all, c, d).mean(1), f.w(p + "k_layernorm.weight"), eps)
        kb = ops.rotate(np.repeat(kb[:, None, :], c, axis=0), L.rope.dim, inv[:], factor, False)[::c, 0] \
            if nb_all else kb                       # each block's key rotated at its first position
        out, choice = np.zeros((T, T), bool), np.full((T, top + 1), -1)
        for t in range(T):
            n = t + 1
            nb = n // c
            chosen = list(range(nb))
            if nb > top:
                sc = np.maximum(iq[t] @ kb[:nb].T, 0.0).sum(0) / np.sqrt(d)
                chosen = sorted(np.argsort(-sc, kind="stable")[:top].tolist())
            chosen += [nb] if n % c else []         # the incomplete last block
            choice[t, :len(chosen)] = chosen
            for b in chosen:
                out[t, b * c:min((b + 1) * c, n)] = True
        f.routing.append(choice)                    # the blocks read, as the engine's Qsa.last_choice
        return np.repeat(out[None], heads, axis=0)
    return keep


def _mix(f, X, p, n, eps, inject=True):
    T, D = X.shape[0], X.shape[1] // n
    hn = _rms(X.reshape(T, n, D), f.w(p + "hc_norm.weight").reshape(n, D), eps)
    flat = hn.reshape(T, n * D)
    g = ops.act("sigmoid", f.mm(ops.act("silu", f.mm(flat, p + "input_mix_weight_down.weight") / n),
                                p + "input_mix_weight_up.weight")).reshape(T, n, D)
    x = (g * hn).mean(1)
    return (x, 2.0 * ops.act("sigmoid", f.mm(flat, p + "block_inject_weight.weight") / n)) if inject else x


_M64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


class _PLE:
    """What the PLE layers read from the config (transformers' Qwen4ExpTextConfig and its defaults), with each PLE
    layer's hash multipliers (SplitMix64 from seed + 10007 x the layer's index, odd, below 2^63 / vocab) and its heads'
    prime vocabularies (the consecutive primes from ngram_vocab_size_base, one per head of every PLE layer in turn)
    and their first rows: derived here as transformers derives them, not taken from the engine."""

    def __init__(self, cfg: dict):
        self.ple_layer_ids = sorted(set(get(cfg, "ple_layer_ids", []) or []))
        self.ngram_size, self.heads_per_ngram = get(cfg, "ngram_size", 3), get(cfg, "heads_per_ngram", 8)
        self.hc_count, self.hidden_size = get(cfg, "hc_count", 4), cfg["hidden_size"]
        self.rms_norm_eps = get(cfg, "rms_norm_eps", 1e-6)
        self.ple_conv_kernel_size = get(cfg, "ple_conv_kernel_size", 4)
        self.split_ngram_parts = get(cfg, "split_ngram_parts", 512)
        self.vocab_size, self.seed = cfg["vocab_size"], get(cfg, "seed", 1234)
        self.base = get(cfg, "ngram_vocab_size_base", 20_000_000)
        eos = cfg.get("eos_token_id")
        self.ple_eos = (eos[0] if eos else None) if isinstance(eos, list) else eos

    def multipliers(self, index: int) -> list:
        half = max(1, ((1 << 63) - 1) // max(self.vocab_size, 1) // 2)
        start = self.seed + 10007 * index
        return [2 * (_splitmix64((start + 0x9E3779B97F4A7C15 * (i + 1)) & _M64) % half) + 1
                for i in range(self.ngram_size)]

    def vocabularies(self, index: int) -> tuple[list, list]:
        heads = (self.ngram_size - 1) * self.heads_per_ngram
        primes, v = [], self.base - 1
        while len(primes) < (index + 1) * heads:
            v += 1
            if v > 1 and all(v % d for d in range(2, int(v ** 0.5) + 1)):
                primes.append(v)
        sizes = primes[index * heads:]
        return sizes, [sum(sizes[:k]) for k in range(heads)]


def _ngram_rows(cfg: _PLE, ids, index):
    """Each token's table rows [T, (n - 1) heads] (transformers' Qwen4ExpTextNGramEmbedding, a fresh sequence): the
    tokens 0..n-1 places back, eos past the start or past an eos before the token, hashed per order by XOR of their
    products with the layer's multipliers (64-bit, wrapping), each head's floor modulo its prime plus its offset."""
    n, H, eos = cfg.ngram_size, cfg.heads_per_ngram, cfg.ple_eos
    mult, (sizes, offsets) = cfg.multipliers(index), cfg.vocabularies(index)
    rows = np.zeros((len(ids), (n - 1) * H), np.int64)
    for t in range(len(ids)):
        ctx = []
        for s in range(n):
            before = [int(ids[t - j]) if t - j >= 0 else eos for j in range(1, s + 1)]
            ctx.append(eos if s and eos in before else int(ids[t]) if s == 0 else int(ids[t - s]))
        h = 0
        for o in range(n):
            h ^= (ctx[o] * mult[o]) % (1 << 64)
            if o:
                signed = h - (1 << 64) if h >> 63 else h
                for k in range((o - 1) * H, o * H):
                    rows[t, k] = offsets[k] + signed % sizes[k]
    return rows


def _ple(f, X, cfg, p, index, ids, names):
    """Qwen4ExpTextPLELayer's output added to the streams X [T, n D]."""
    n, D, eps, N, K = cfg.hc_count, cfg.hidden_size, cfg.rms_norm_eps, cfg.ngram_size, cfg.ple_conv_kernel_size
    T = X.shape[0]
    t = p + "ple.ple_embedding.ngram_embedding."
    parts = [t + f"shard_{k}.weight" for k in range(cfg.split_ngram_parts)]
    shards = [t + "weight"] if t + "weight" in names else parts
    table = np.concatenate([f.w(m) for m in shards])
    emb = table[_ngram_rows(cfg, ids, index)].reshape(T, -1)
    grouped = lambda x, name: _rms(x.reshape(T, n, D), f.w(p + f"ple.{name}.weight").reshape(n, D), eps)  # noqa: E731
    kn, v = grouped(f.mm(emb, p + "ple.key_proj.weight"), "norm_key"), f.mm(emb, p + "ple.value_proj.weight")
    g = (kn * grouped(X, "norm_query")).sum(-1) / np.sqrt(D)
    g = np.sign(g) * np.sqrt(np.maximum(np.abs(g), 1e-6))
    u = ops.act("sigmoid", g)[:, :, None] * v[:, None, :]                                    # [T, n, D]
    w = np.concatenate([np.zeros(((K - 1) * N, n * D)), grouped(u, "norm_conv").reshape(T, n * D)])
    cw = f.w(p + "ple.conv1d.weight").reshape(n * D, K)
    conv = sum(cw[:, k] * w[k * N:k * N + T] for k in range(K))
    return X + u.reshape(T, n * D) + ops.act("silu", conv)


def qwen4_exp_text(cfg, names, family="qwen4_exp_text"):
    c = _PLE(cfg)
    fixed = {k: v for k, v in cfg.items() if k not in ("mlp_only_layers", "decoder_sparse_step")}
    fixed.update(decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=get(cfg, "norm_topk_prob", True),
                 num_experts=get(cfg, "num_experts", 512), num_experts_per_tok=get(cfg, "num_experts_per_tok", 10))
    spec = qwen3_next(fixed, names, family)
    n, eps = get(cfg, "hc_count", 4), get(cfg, "rms_norm_eps", 1e-6)
    spec.final_norm = None
    for i, L in enumerate(spec.layers):
        L.attn_norm = L.mlp_norm = None
        if L.deltanet is None:
            L.keep = _qsa_keep(cfg, f"model.layers.{i}.self_attn.indexer.")

    def forward(f, ids):
        X = np.tile(f.w(spec.embed)[ids], (1, n))
        for i, L in enumerate(spec.layers):
            p = f"model.layers.{i}."
            if i + 1 in c.ple_layer_ids:
                X = _ple(f, X, c, p, c.ple_layer_ids.index(i + 1), ids, names)
            for w, block in (("attn", f.deltanet if L.deltanet is not None else f.attention), ("mlp", f.mlp)):
                x, post = _mix(f, X, f"{p}{w}_hyper_connection.", n, eps)
                X = X + np.repeat(post, X.shape[1] // n, axis=1) * np.tile(block(L, x), (1, n))
        return f.mm(_mix(f, X, "model.hyper_connection_mixer.", n, eps, inject=False), spec.head)
    spec.forward = forward
    return spec


def qwen4_exp(cfg, names):
    return qwen4_exp_text(cfg, names, "qwen4_exp")


FAMILIES.update(qwen4_exp_text=qwen4_exp_text, qwen4_exp=qwen4_exp)
