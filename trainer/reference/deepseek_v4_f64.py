"""DeepSeek-V4's forward in float64 numpy over a Hugging Face folder (its safetensors read here, original
checkpoint names as transformers 5.25 saves them): the definition the engine's kernels are to match, written from
the model's description (docs/hf-models.md, deepseek_v4) and checked against transformers' logits by
tests/test_dsv4_5.py. A whole prompt in one pass, as transformers' forward without a cache: every query sees the
last `sliding_window` positions, the compressed entries whose window has closed at or before it (CSA: only the
indexer's top `index_topk` of them), and its head's sink."""
import json
import struct
from pathlib import Path

import numpy as np

_DT = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: Path) -> dict:
    raw = Path(path).read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    out = {}
    for k, v in json.loads(raw[8:8 + n]).items():
        if k == "__metadata__":
            continue
        if v["dtype"] not in _DT:
            raise ValueError(f"{path}: {k}: tensor type {v['dtype']} not read by this reference")
        a, b = v["data_offsets"]
        t = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=_DT[v["dtype"]]).reshape(v["shape"])
        out[k] = t.astype(np.int64 if t.dtype.kind == "i" else np.float64)
    return out


def mm(W, x, name):
    """x times the matrix `name` transposed: W's own product when it has one (petit verify's reading of a .petit
    file, whose activations it may round as the engine does: trainer/reference/families/dsv4_5.py)."""
    f = getattr(W, "mm", None)
    return f(x, name) if f is not None else x @ W[name].T


def rms(x, w=None, eps=1e-6):
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y if w is None else y * w


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def inv_freq(rp, rd, max_pos):
    """The inverse frequencies [rd / 2] of a rope_parameters entry: theta^(-2i/rd), or YaRN's blend of them with
    the same divided by `factor` (the ramp between beta_fast and beta_slow rotations over the original context)."""
    base = rp["rope_theta"]
    pos_freqs = base ** (np.arange(0, rd, 2) / rd)
    if rp.get("rope_type", "default") == "default":
        return 1.0 / pos_freqs
    factor, orig = float(rp["factor"]), rp.get("original_max_position_embeddings") or max_pos

    def dim_of(rot):
        return rd * np.log(orig / (rot * 2 * np.pi)) / (2 * np.log(base))
    low, high = dim_of(rp.get("beta_fast") or 32), dim_of(rp.get("beta_slow") or 1)
    if rp.get("truncate", True):
        low, high = np.floor(low), np.ceil(high)
    low, high = max(low, 0), min(high, rd - 1)
    high = high + 0.001 if low == high else high
    keep = 1 - np.clip((np.arange(rd // 2) - low) / (high - low), 0, 1)
    return (1 / (factor * pos_freqs)) * (1 - keep) + (1 / pos_freqs) * keep


def rope(x, pos, theta, rd, sign=1.0):
    """Adjacent pairs of the last `rd` channels of x [..., S, (H,) d] rotated by pos * theta^(-2i/rd) (theta an
    array: those inverse frequencies)."""
    inv = theta if isinstance(theta, np.ndarray) else theta ** (-np.arange(0, rd, 2) / rd)
    ang = np.asarray(pos, np.float64)[:, None] * inv  # [S, rd/2]
    if x.ndim == 3:
        ang = ang[:, None, :]
    c, s = np.cos(ang), sign * np.sin(ang)
    out = x.copy()
    a, b = x[..., -rd::2], x[..., -rd + 1::2]
    out[..., -rd::2], out[..., -rd + 1::2] = a * c - b * s, b * c + a * s
    return out


def hyper(X, fn, base, scale, n, iters, eps, norm_eps):
    """Hyper-connection weights of the streams X [S, n, D]: (collapsed input [S, D], post [S, n], comb [S, n, n])."""
    m = rms(X.reshape(len(X), -1), eps=norm_eps) @ fn.T
    pre = sigmoid(m[:, :n] * scale[0] + base[:n]) + eps
    post = 2 * sigmoid(m[:, n:2 * n] * scale[1] + base[n:2 * n])
    comb = softmax(m[:, 2 * n:].reshape(-1, n, n) * scale[2] + base[2 * n:].reshape(n, n)) + eps
    comb = comb / (comb.sum(-2, keepdims=True) + eps)
    for _ in range(iters - 1):
        comb = comb / (comb.sum(-1, keepdims=True) + eps)
        comb = comb / (comb.sum(-2, keepdims=True) + eps)
    return (pre[:, :, None] * X).sum(1), post, comb


def pool(kv, gate, ape, m, d, overlap):
    """One entry per closed window of m tokens: sum over the window's slots of softmax(gate + ape) * kv, channel by
    channel. Overlapping (CSA, kv / gate 2d wide): 2m slots, the previous window's first d channels then this
    window's last d (window 0: this window's only)."""
    nw = len(kv) // m
    out = np.zeros((nw, d))
    for w in range(nw):
        k, g = kv[w * m:(w + 1) * m], gate[w * m:(w + 1) * m] + ape
        if overlap:
            k0 = kv[(w - 1) * m:w * m, :d] if w else np.zeros((0, d))
            g0 = (gate[(w - 1) * m:w * m] + ape)[:, :d] if w else np.zeros((0, d))
            k, g = np.concatenate([k0, k[:, d:]]), np.concatenate([g0, g[:, d:]])
        out[w] = (softmax(g, 0) * k).sum(0)
    return out


def compress(x, W, p, m, d, overlap, theta, rd, eps):
    """The compressed entries of x: pooled, kv_norm'ed, roped at each window's first position."""
    out = pool(mm(W, x, p + "wkv.weight"), mm(W, x, p + "wgate.weight"), W[p + "ape"], m, d, overlap)
    return rope(rms(out, W[p + "norm.weight"], eps), np.arange(len(out)) * m, theta, rd)


def attention(x, W, p, c, kind, ids_len):
    S, H, d, rd, eps = len(x), c["num_attention_heads"], c["head_dim"], c["qk_rope_head_dim"], c["rms_norm_eps"]
    rp = c["rope_parameters"]["main" if kind == "sliding_attention" else "compress"]
    theta, pos = inv_freq(rp, rd, c["max_position_embeddings"]), np.arange(S)
    qr = rms(mm(W, x, p + "wq_a.weight"), W[p + "q_norm.weight"], eps)
    q = rope(rms(mm(W, qr, p + "wq_b.weight").reshape(S, H, d), eps=eps), pos, theta, rd)
    kv = rope(rms(mm(W, x, p + "wkv.weight"), W[p + "norm.weight"], eps), pos, theta, rd)
    t, j = pos[:, None], pos[None, :]
    mask = (j <= t) & (t - j < c["sliding_window"])
    keys = kv
    if kind != "sliding_attention":
        m = c["compress_rates"][kind]
        csa = kind == "compressed_sparse_attention"
        C = compress(x, W, p + "compressor.", m, d, csa, theta, rd, eps)
        seen = np.arange(len(C))[None, :] < (pos[:, None] + 1) // m
        if csa:
            seen = seen & indexer(x, qr, W, p + "indexer.", c, m, theta, seen)
        keys, mask = np.concatenate([kv, C]), np.concatenate([mask, seen], 1)
    o = rope(attend(q, keys, mask, W[p + "attn_sink"], d ** -0.5), pos, theta, rd, sign=-1.0)
    G, r = c["o_groups"], c["o_lora_rank"]
    og = o.reshape(S, G, -1)
    wa = W[p + "wo_a.weight"].reshape(G, r, -1)
    return mm(W, np.einsum("sgi,gri->sgr", og, wa).reshape(S, G * r), p + "wo_b.weight")


def attend(q, keys, mask, sinks, scale):
    """q [S, H, d] over the K = V rows keys [K, d] where mask [S, K], each head's sink in the denominator."""
    lg = np.where(mask[None], np.einsum("shd,kd->hsk", q, keys) * scale, -np.inf)
    sink = sinks[:, None, None]
    mx = np.maximum(lg.max(-1, keepdims=True), sink)
    e = np.exp(lg - mx)
    return np.einsum("hsk,kd->shd", e / (e.sum(-1, keepdims=True) + np.exp(sink - mx)), keys)


def indexer(x, qr, W, p, c, m, theta, seen):
    """The Lightning indexer's choice [S, T]: the top index_topk of sum_h w_h relu(q_h . K) among the causal entries."""
    nh, d, rd = c["index_n_heads"], c["index_head_dim"], c["qk_rope_head_dim"]
    K = compress(x, W, p + "compressor.", m, d, True, theta, rd, c["rms_norm_eps"])
    q = rope(mm(W, qr, p + "wq_b.weight").reshape(len(x), nh, d), np.arange(len(x)), theta, rd)
    wts = mm(W, x, p + "weights_proj.weight") * nh ** -0.5
    sc = (np.maximum(np.einsum("shd,td->sht", q, K), 0) * d ** -0.5 * wts[:, :, None]).sum(1)
    sc = np.where(seen, sc, -np.inf)
    keep = np.zeros_like(seen)
    for s in range(len(x)):
        n = int(seen[s].sum())
        keep[s, np.argsort(-sc[s], kind="stable")[:min(n, c["index_topk"])]] = True
    if getattr(W, "routing", None) is not None:       # petit verify compares the entries each query takes
        W.routing.append(np.array([np.r_[np.flatnonzero(r), [-1] * (c["index_topk"] - r.sum())] for r in keep]))
    return keep


def moe(x, W, p, c, kind, ids):
    lim, k, E = c["swiglu_limit"], c["num_experts_per_tok"], c["n_routed_experts"]
    lg = mm(W, x, p + "gate.weight")
    fn = c.get("scoring_func", "sqrtsoftplus")
    if fn == "sqrtsoftplus":
        sc = np.sqrt(np.logaddexp(0.0, lg))
    elif fn == "sigmoid":
        sc = sigmoid(lg)
    else:
        raise ValueError(f"scoring_func {fn!r} not in this reference")
    if kind == "hash_moe":
        idx = W[p + "gate.tid2eid"][ids]
    else:
        idx = np.argsort(-(sc + W.get(p + "gate.bias", np.zeros(E))), 1, kind="stable")[:, :k]
    if getattr(W, "routing", None) is not None:       # petit verify compares the experts each token takes
        W.routing.append(np.sort(idx, 1))
    w = np.take_along_axis(sc, idx, 1)
    w = w / (w.sum(1, keepdims=True) + 1e-20) * c["routed_scaling_factor"]

    def mlp(q, v):
        g = np.minimum(mm(W, v, q + "w1.weight"), lim)
        u = np.clip(mm(W, v, q + "w3.weight"), -lim, lim)
        return mm(W, g * sigmoid(g) * u, q + "w2.weight")
    out = mlp(p + "shared_experts.", x)
    for s in range(len(x)):
        for j in range(k):
            out[s] += w[s, j] * mlp(f"{p}experts.{idx[s, j]}.", x[s:s + 1])[0]
    return out


def load(folder):
    folder = Path(folder)
    c = json.loads((folder / "config.json").read_text())
    c.setdefault("qk_rope_head_dim", int(c["head_dim"] * c["partial_rotary_factor"]))
    for label, rp in c["rope_parameters"].items():
        if rp.get("rope_type", "default") not in (("default", "yarn") if label == "compress" else ("default",)) or \
                rp.get("attention_factor", 1.0) != 1.0:
            raise ValueError(f"deepseek_v4 reference: rope_type {rp['rope_type']!r} ({label}) not in this reference")
    return c, read_safetensors(folder / "model.safetensors")


def logits(folder, ids) -> np.ndarray:
    c, W = load(folder)
    return forward(c, W, ids)


def forward(c, W, ids) -> np.ndarray:
    """The logits [S, vocab] of ids under the config dict c (transformers' keys, `qk_rope_head_dim` added) and the
    tensors W (name -> float64 array, or a mapping with its own `mm`)."""
    ids = np.asarray(ids, np.int64)
    n, eps, hce = c["hc_mult"], c["rms_norm_eps"], c["hc_eps"]
    X = np.repeat(W["model.embed_tokens.weight"][ids][:, None, :], n, 1)
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        for part in ("attn", "ffn"):
            x, post, comb = hyper(X, W[p + f"hc_{part}_fn"], W[p + f"hc_{part}_base"], W[p + f"hc_{part}_scale"],
                                  n, c["hc_sinkhorn_iters"], hce, eps)
            x = rms(x, W[p + f"{part}_norm.weight"], eps)
            y = (attention(x, W, p + "attn.", c, kind, len(ids)) if part == "attn"
                 else moe(x, W, p + "ffn.", c, c["mlp_layer_types"][i], ids))
            X = post[:, :, None] * y[:, None, :] + np.einsum("sjk,sjd->skd", comb, X)
    pre = sigmoid((rms(X.reshape(len(X), -1), eps=eps) @ W["model.hc_head.hc_fn"].T) * W["model.hc_head.hc_scale"]
                  + W["model.hc_head.hc_base"]) + hce
    h = rms((pre[:, :, None] * X).sum(1), W["model.norm.weight"], eps)
    return mm(W, h, "head.weight")
