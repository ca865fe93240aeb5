"""The gemma group of issue 30, each written from transformers 5's modeling file: gemma3n_text and gemma3n (its
language model), gemma4_text and gemma4 (its language model; per-layer heads, keys as values, proportional RoPE,
per-layer inputs, KV sharing, layer_scalar, as one forward too). Gemma 3n's streams (AltUp), per-layer inputs,
LAuReL, activation sparsity and KV sharing do not fit LayerSpec's one residual stream, so its ModelSpec carries its
own forward (`ModelSpec.forward`), written here in float64 over the file's tensors, sharing no code with the engine
(petit/models/families/dense/gemma3n_text.py, gemma4_text.py)."""
import math
import statistics

import numpy as np

from trainer.reference import ops
from trainer.reference.families.common import activation, get, heads, rms, rope
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec, RopeSpec


def gemma3n_text(cfg, names, family="gemma3n_text"):
    H, KV, hd = heads(cfg)
    eps = get(cfg, "rms_norm_eps", 1e-6)
    n_layers, D = cfg["num_hidden_layers"], cfg["hidden_size"]
    n, P = get(cfg, "altup_num_inputs", 4), get(cfg, "hidden_size_per_layer_input", 256)
    a_idx = get(cfg, "altup_active_idx", 0)
    Vp = get(cfg, "vocab_size_per_layer_input", 262144)
    types = cfg.get("layer_types") or ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention"
                                       for i in range(n_layers)]
    sparsity = cfg.get("activation_sparsity_pattern")
    if sparsity is None:
        sparsity = [0.95] * 10 + [0.0] * (n_layers - 10) if n_layers > 10 else [0.0] * n_layers
    shared = get(cfg, "num_kv_shared_layers", 15)
    first = n_layers - shared
    src = [i if i < first else max(j for j in range(first) if types[j] == types[i]) for i in range(n_layers)]
    window = get(cfg, "sliding_window", 512)
    ropes = {"full_attention": rope(cfg, hd, get(cfg, "rope_theta", 1e6)),
             "sliding_attention": rope(cfg, hd, get(cfg, "rope_local_base_freq", 1e4), scaling=None)}
    act = activation(cfg, "hidden_activation", "gelu_pytorch_tanh")
    scale_out = get(cfg, "altup_correct_scale", True)
    cap = get(cfg, "final_logit_softcapping", 0.0) or 0.0
    tied = get(cfg, "tie_word_embeddings", True)
    m = "model."
    extra = [m + "embed_tokens_per_layer.weight", m + "per_layer_model_projection.weight",
             m + "per_layer_projection_norm.weight"]
    extra += [f"{m}altup_projections.{j}.weight" for j in range(n - 1)]
    extra += [f"{m}altup_unembed_projections.{j}.weight" for j in range(n - 1)]
    for i in range(n_layers):
        p = f"{m}layers.{i}."
        extra += [p + x + ".weight" for x in (
            "self_attn.q_proj", "self_attn.o_proj", "self_attn.q_norm", "mlp.gate_proj", "mlp.up_proj",
            "mlp.down_proj", "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
            "post_feedforward_layernorm", "altup.router_norm", "altup.modality_router", "altup.prediction_coefs",
            "altup.correction_coefs", "laurel.linear_left", "laurel.linear_right", "laurel.post_laurel_norm",
            "per_layer_input_gate", "per_layer_projection", "post_per_layer_input_norm")]
        if src[i] == i:
            extra += [p + x + ".weight" for x in ("self_attn.k_proj", "self_attn.v_proj", "self_attn.k_norm")]
        if scale_out:
            extra.append(p + "altup.correct_output_scale")

    def rmsn(fwd, x, name):
        return ops.norm(x, "rms", eps, fwd.w(name) if name else None, None)

    def magnitude(y, x):
        target = np.sqrt(np.mean(x * x, axis=-1, keepdims=True))
        return y * target / np.sqrt(np.maximum(np.mean(y * y, axis=-1, keepdims=True), 1e-5))

    def modalities(fwd, p, x):
        r = rmsn(fwd, x, p + "altup.router_norm.weight") / D
        return np.tanh(r @ fwd.w(p + "altup.modality_router.weight").T)            # [T, n]

    def forward(fwd, ids):
        T = len(ids)
        mm = fwd.mm
        x0 = fwd.w(m + "embed_tokens.weight")[ids] * float(np.float32(D ** 0.5))
        proj = mm(x0, m + "per_layer_model_projection.weight") * D ** -0.5
        proj = rmsn(fwd, proj.reshape(T, n_layers, P), m + "per_layer_projection_norm.weight")
        table = fwd.w(m + "embed_tokens_per_layer.weight")[np.where(ids < Vp, ids, 0)].reshape(T, n_layers, P)
        ple = (proj + table * float(np.float32(P ** 0.5))) / math.sqrt(2.0)
        xs = [x0] + [magnitude(mm(x0, f"{m}altup_projections.{j - 1}.weight"), x0) for j in range(1, n)]
        kv = {}
        for i in range(n_layers):
            p = f"{m}layers.{i}."
            c = (modalities(fwd, p, xs[a_idx]) @ fwd.w(p + "altup.prediction_coefs.weight").T).reshape(T, n, n)
            pred = [xs[j] + sum(c[:, j, k][:, None] * xs[k] for k in range(n)) for j in range(n)]
            active = pred[a_idx]
            h = rmsn(fwd, active, p + "input_layernorm.weight")
            laurel = h + rmsn(fwd, mm(mm(h, p + "laurel.linear_left.weight"), p + "laurel.linear_right.weight"),
                              p + "laurel.post_laurel_norm.weight")
            r = ropes[types[i]]
            inv, factor = r.freqs(T)
            q = rmsn(fwd, mm(h, p + "self_attn.q_proj.weight").reshape(T, H, hd), p + "self_attn.q_norm.weight")
            q = ops.rotate(q, r.dim, inv, factor, r.interleaved)
            if src[i] == i:
                k = rmsn(fwd, mm(h, p + "self_attn.k_proj.weight").reshape(T, KV, hd), p + "self_attn.k_norm.weight")
                kv[i] = (ops.rotate(k, r.dim, inv, factor, r.interleaved),
                         rmsn(fwd, mm(h, p + "self_attn.v_proj.weight").reshape(T, KV, hd), None))
            k, v = kv[src[i]]
            out = ops.attention(q, k, v, 1.0, 0.0, window if types[i] == "sliding_attention" else 0)
            attn = rmsn(fwd, mm(out, p + "self_attn.o_proj.weight"), p + "post_attention_layernorm.weight")
            x = (active + attn + laurel) / math.sqrt(2.0)
            hn = rmsn(fwd, x, p + "pre_feedforward_layernorm.weight")
            g = mm(hn, p + "mlp.gate_proj.weight")
            if sparsity[i] > 0:
                cut = g.mean(-1, keepdims=True) + g.std(-1, keepdims=True) * statistics.NormalDist().inv_cdf(
                    sparsity[i])
                g = np.maximum(g - cut, 0.0)
            y = mm(ops.act(act, g) * mm(hn, p + "mlp.up_proj.weight"), p + "mlp.down_proj.weight")
            x = x + rmsn(fwd, y, p + "post_feedforward_layernorm.weight")
            cc = modalities(fwd, p, x) @ fwd.w(p + "altup.correction_coefs.weight").T + 1.0      # [T, n]
            xs = [(x - active) * cc[:, j][:, None] + pred[j] for j in range(n)]
            first_pred = xs[a_idx] * fwd.w(p + "altup.correct_output_scale") if scale_out else xs[a_idx]
            gp = ops.act(act, mm(first_pred, p + "per_layer_input_gate.weight")) * ple[:, i]
            add = rmsn(fwd, mm(gp, p + "per_layer_projection.weight"), p + "post_per_layer_input_norm.weight")
            xs = [xs[0]] + [xs[j] + add for j in range(1, n)]
        outs = [xs[0]] + [magnitude(mm(xs[j], f"{m}altup_unembed_projections.{j - 1}.weight"), xs[0])
                          for j in range(1, n)]
        hfin = rmsn(fwd, sum(outs) / n, m + "norm.weight")
        y = mm(hfin, m + "embed_tokens.weight" if tied else "lm_head.weight")
        return cap * np.tanh(y / cap) if cap else y

    spec = ModelSpec(family, H, KV, hd, m + "embed_tokens.weight", m + "embed_tokens.weight" if tied else
                     "lm_head.weight", rms(m + "norm", eps), act=act, forward=forward, extra_names=tuple(extra))
    # the blocks' matrices by role, for what reads a spec's layers (verify's depth and its matrix check); the
    # forward above is what computes
    for i in range(n_layers):
        p = f"{m}layers.{i}."
        own = src[i] == i
        spec.layers.append(LayerSpec(q=p + "self_attn.q_proj.weight", k=p + "self_attn.k_proj.weight" if own else None,
                                     v=p + "self_attn.v_proj.weight" if own else None, o=p + "self_attn.o_proj.weight",
                                     **{x: f"{p}mlp.{x}_proj.weight" for x in ("gate", "up", "down")}))
    return spec


def gemma3n(cfg, names):
    return gemma3n_text(cfg, names, "gemma3n")


def _proportional(hd, base, share):
    """transformers' proportional RoPE as a RopeSpec over the whole head: the first int(share hd / 2) frequencies
    base^(-2i / hd), the others 0 (not rotated)."""
    angles = int(share * hd // 2)

    def freqs(_T):
        inv = np.zeros(hd // 2)
        inv[:angles] = 1.0 / base ** (np.arange(0, 2 * angles, 2) / hd)
        return inv, 1.0
    return RopeSpec(hd, freqs)


def gemma4_text(cfg, names, family="gemma4_text"):
    H = cfg["num_attention_heads"]
    eps = get(cfg, "rms_norm_eps", 1e-6)
    n_layers, D = cfg["num_hidden_layers"], cfg["hidden_size"]
    hd0, kv0 = get(cfg, "head_dim", 256), get(cfg, "num_key_value_heads", H)
    types = cfg.get("layer_types")
    if not types:
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n_layers)]
        types[-1] = "full_attention"
    plc = cfg.get("per_layer_config")
    if plc is None:
        over = {"head_dim": get(cfg, "global_head_dim", 512)}
        if cfg.get("attention_k_eq_v") and cfg.get("num_global_key_value_heads") is not None:
            over["num_key_value_heads"] = cfg["num_global_key_value_heads"]
        plc = {str(i): over for i, t in enumerate(types) if t == "full_attention"}
    shapes = [(plc.get(str(i), {}).get("head_dim", hd0), plc.get(str(i), {}).get("num_key_value_heads", kv0))
              for i in range(n_layers)]
    shared = get(cfg, "num_kv_shared_layers", 0)
    first = n_layers - shared
    src = [i if i < first else max(j for j in range(first) if types[j] == types[i]) for i in range(n_layers)]
    window = get(cfg, "sliding_window", 512)
    k_eq_v = bool(cfg.get("attention_k_eq_v"))
    moe = bool(cfg.get("enable_moe_block"))
    n_exp, top_k = (cfg["num_experts"], cfg["top_k_experts"]) if moe else (0, 0)
    full_kind = get(cfg, "full_rope_type", "proportional")
    P = get(cfg, "hidden_size_per_layer_input", 256) or 0
    act = activation(cfg, "hidden_activation", "gelu_pytorch_tanh")
    cap = get(cfg, "final_logit_softcapping", 0.0) or 0.0
    tied = get(cfg, "tie_word_embeddings", True)
    m = "model."

    def rope_of(i):
        hd = shapes[i][0]
        if types[i] == "sliding_attention":
            return rope(dict(cfg, rope_scaling=None), hd, get(cfg, "rope_local_base_freq", 1e4), scaling=None)
        if full_kind == "proportional":
            return _proportional(hd, float(get(cfg, "rope_theta", 1e6)), get(cfg, "partial_rotary_factor", 0.25))
        return rope(dict(cfg, rope_scaling=None), hd, get(cfg, "rope_theta", 1e6), scaling=None)

    extra = []
    if P:
        extra += [m + "embed_tokens_per_layer.weight", m + "per_layer_model_projection.weight",
                  m + "per_layer_projection_norm.weight"]
    for i in range(n_layers):
        p = f"{m}layers.{i}."
        extra += [p + x + ".weight" for x in ("self_attn.q_norm", "input_layernorm", "post_attention_layernorm",
                                              "pre_feedforward_layernorm", "post_feedforward_layernorm")]
        if src[i] == i:
            extra.append(p + "self_attn.k_norm.weight")
        if P:
            extra += [p + x + ".weight" for x in ("per_layer_input_gate", "per_layer_projection",
                                                  "post_per_layer_input_norm")]
        if moe:
            extra += [p + x + ".weight" for x in ("post_feedforward_layernorm_1", "pre_feedforward_layernorm_2",
                                                  "post_feedforward_layernorm_2", "router.folded")]

    def rmsn(fwd, x, name):
        return ops.norm(x, "rms", eps, fwd.w(name) if name else None, None)

    def forward(fwd, ids):
        T = len(ids)
        mm = fwd.mm
        x = fwd.w(m + "embed_tokens.weight")[ids] * float(np.float32(D ** 0.5))
        if P:
            proj = rmsn(fwd, (mm(x, m + "per_layer_model_projection.weight") * D ** -0.5).reshape(T, n_layers, P),
                        m + "per_layer_projection_norm.weight")
            table = fwd.w(m + "embed_tokens_per_layer.weight")[ids].reshape(T, n_layers, P)
            ple = (proj + table * float(np.float32(P ** 0.5))) * 2.0 ** -0.5
        kv = {}
        for i in range(n_layers):
            p = f"{m}layers.{i}."
            hd, KV = shapes[i]
            r = rope_of(i)
            inv, factor = r.freqs(T)
            h = rmsn(fwd, x, p + "input_layernorm.weight")
            q = rmsn(fwd, mm(h, p + "self_attn.q_proj.weight").reshape(T, H, hd), p + "self_attn.q_norm.weight")
            q = ops.rotate(q, r.dim, inv, factor, r.interleaved)
            if src[i] == i:
                k_raw = mm(h, p + "self_attn.k_proj.weight").reshape(T, KV, hd)
                v_raw = k_raw if k_eq_v and types[i] == "full_attention" else \
                    mm(h, p + "self_attn.v_proj.weight").reshape(T, KV, hd)
                k = ops.rotate(rmsn(fwd, k_raw, p + "self_attn.k_norm.weight"), r.dim, inv, factor, r.interleaved)
                kv[i] = (k, rmsn(fwd, v_raw, None))
            k, v = kv[src[i]]
            out = ops.attention(q, k, v, 1.0, 0.0, window if types[i] == "sliding_attention" else 0)
            x = x + rmsn(fwd, mm(out, p + "self_attn.o_proj.weight"), p + "post_attention_layernorm.weight")
            hn = rmsn(fwd, x, p + "pre_feedforward_layernorm.weight")
            y = mm(ops.act(act, mm(hn, p + "mlp.gate_proj.weight")) * mm(hn, p + "mlp.up_proj.weight"),
                   p + "mlp.down_proj.weight")
            if moe:          # the experts beside the MLP, on the block's input (the file's folded router)
                y = rmsn(fwd, y, p + "post_feedforward_layernorm_1.weight")
                h2 = rmsn(fwd, x, p + "pre_feedforward_layernorm_2.weight")
                logits = h2 @ fwd.w(p + "router.folded.weight").T
                prob = np.exp(logits - logits.max(axis=1, keepdims=True))
                prob /= prob.sum(axis=1, keepdims=True)
                top = np.argsort(-prob, axis=1, kind="stable")[:, :top_k]
                fwd.routing.append(np.sort(top, axis=1))
                wt = np.take_along_axis(prob, top, axis=1)
                wt = wt / wt.sum(axis=1, keepdims=True)
                out = np.zeros_like(h2)
                for e in range(n_exp):
                    rows, slot = np.nonzero(top == e)
                    if rows.size:
                        xe = h2[rows]
                        ye = mm(ops.act(act, mm(xe, f"{p}experts.{e}.gate_proj.weight")) *
                                mm(xe, f"{p}experts.{e}.up_proj.weight"), f"{p}experts.{e}.down_proj.weight")
                        np.add.at(out, rows, ye * wt[rows, slot][:, None])
                y = y + rmsn(fwd, out, p + "post_feedforward_layernorm_2.weight")
            x = x + rmsn(fwd, y, p + "post_feedforward_layernorm.weight")
            if P:
                g = ops.act(act, mm(x, p + "per_layer_input_gate.weight")) * ple[:, i]
                x = x + rmsn(fwd, mm(g, p + "per_layer_projection.weight"), p + "post_per_layer_input_norm.weight")
            if p + "layer_scalar" in names:
                x = x * fwd.w(p + "layer_scalar").reshape(-1)[0]
        y = mm(rmsn(fwd, x, m + "norm.weight"), m + "embed_tokens.weight" if tied else "lm_head.weight")
        return cap * np.tanh(y / cap) if cap else y

    spec = ModelSpec(family, H, kv0, hd0, m + "embed_tokens.weight", m + "embed_tokens.weight" if tied else
                     "lm_head.weight", rms(m + "norm", eps), act=act, forward=forward, extra_names=tuple(extra))
    for i in range(n_layers):
        p = f"{m}layers.{i}."
        own = src[i] == i
        has_v = own and not (k_eq_v and types[i] == "full_attention")
        spec.layers.append(LayerSpec(q=p + "self_attn.q_proj.weight", k=p + "self_attn.k_proj.weight" if own else None,
                                     v=p + "self_attn.v_proj.weight" if has_v else None,
                                     o=p + "self_attn.o_proj.weight",
                                     **{x: f"{p}mlp.{x}_proj.weight" for x in ("gate", "up", "down")}))
        if moe:                  # the experts' matrices by role, for verify's matrix check and routing
            spec.layers[-1].moe = MoeSpec(p + "router.folded.weight", [
                tuple(f"{p}experts.{e}.{x}_proj.weight" for x in ("gate", "up", "down")) for e in range(n_exp)],
                top_k, True)
    return spec


def gemma4(cfg, names):
    return gemma4_text(cfg, names, "gemma4")


def gemma4_unified_text(cfg, names, family="gemma4_unified_text"):
    """gemma4_text's block without per-layer inputs (the config has no hidden_size_per_layer_input)."""
    return gemma4_text(dict(cfg, hidden_size_per_layer_input=cfg.get("hidden_size_per_layer_input") or 0,
                            sliding_window=get(cfg, "sliding_window", 1024)), names, family)


FAMILIES = {"gemma3n_text": gemma3n_text, "gemma3n": gemma3n, "gemma4_text": gemma4_text, "gemma4": gemma4,
            "gemma4_unified_text": gemma4_unified_text,
            "gemma4_unified": lambda cfg, names: gemma4_unified_text(cfg, names, "gemma4_unified")}
