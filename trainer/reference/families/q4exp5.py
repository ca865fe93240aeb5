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
PLE layers are not modelled (Petit refuses them)."""
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


def qwen4_exp_text(cfg, names, family="qwen4_exp_text"):
    if cfg.get("ple_layer_ids"):
        raise ValueError("the reference does not model Qwen4-Exp's PLE layers")
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
            for w, block in (("attn", f.deltanet if L.deltanet is not None else f.attention), ("mlp", f.mlp)):
                x, post = _mix(f, X, f"{p}{w}_hyper_connection.", n, eps)
                X = X + np.repeat(post, X.shape[1] // n, axis=1) * np.tile(block(L, x), (1, n))
        return f.mm(_mix(f, X, "model.hyper_connection_mixer.", n, eps, inject=False), spec.head)
    spec.forward = forward
    return spec


def qwen4_exp(cfg, names):
    return qwen4_exp_text(cfg, names, "qwen4_exp")


FAMILIES.update(qwen4_exp_text=qwen4_exp_text, qwen4_exp=qwen4_exp)
