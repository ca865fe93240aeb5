"""The fam36h group of issue 36, written from transformers 5.25's modeling code.

Hy3 (modeling_hy_v3): Llama's pre-norm block, q / k RMS-normed per head before RoPE, biases with attention_bias
(q, k, v, o) and mlp_bias (the dense MLPs and the shared expert); the layers mlp_layer_types calls sparse (by default
all but the first) route to the top k of sigmoid(router logits) + e_score_correction_bias, weighed by the chosen
sigmoids / (their sum + 1e-20) x router_scaling_factor, plus an ungated shared expert of moe_intermediate_size x
num_shared_experts (intermediate_size when that is 0). The names transformers saves (mlp.router.gate, mlp.expert_bias,
mlp.shared_mlp) are read when the file has them, else its modules' (mlp.gate, mlp.e_score_correction_bias,
mlp.shared_experts).

Dory (modeling_dory), Ergo (modeling_ergo): see dory and ergo below.
"""
import numpy as np

from trainer.reference import ops
from trainer.reference.families.common import activation, get, heads, layer_types, rms, rope
from trainer.reference.families.llama import llama_like
from trainer.reference.families.moe import _experts
from trainer.reference.spec import LayerSpec, ModelSpec, MoeSpec


def _either(names, saved, module):
    return saved if saved in names else module


def hy_v3(cfg, names):
    n, E = cfg["num_hidden_layers"], get(cfg, "num_experts", 192)
    kinds = get(cfg, "mlp_layer_types", ["dense"] + ["sparse"] * (n - 1))
    mlp_bias, bias = get(cfg, "mlp_bias", False), get(cfg, "attention_bias", False)
    r = rope(cfg, heads(cfg)[2], theta=get(cfg, "rope_theta", 11158840.0))

    def moe(i, p):
        if kinds[i] != "sparse":
            return None
        sh = p + ("mlp.shared_mlp" if p + "mlp.shared_mlp.up_proj.weight" in names else "mlp.shared_experts")
        shared = tuple(f"{sh}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
        shared_b = tuple(f"{sh}.{x}.bias" for x in ("gate_proj", "up_proj", "down_proj")) if mlp_bias else None
        return MoeSpec(_either(names, p + "mlp.router.gate.weight", p + "mlp.gate.weight"), _experts(p, "mlp", E),
                       cfg["num_experts_per_tok"], True, shared=shared, shared_b=shared_b, scoring="sigmoid",
                       sel_bias=_either(names, p + "mlp.expert_bias", p + "mlp.e_score_correction_bias"),
                       norm_eps=1e-20, routed_scale=get(cfg, "router_scaling_factor", 2.826))

    return llama_like(cfg, names, "hy_v3", eps=get(cfg, "rms_norm_eps", 1e-5), qkv_bias=bias, o_bias=bias,
                      mlp_bias=mlp_bias, qk_norm="head", moe_of=moe, rope_of=lambda i: r)


FAMILIES = {"hy_v3": hy_v3}


def _dory_names(names, i):
    """Layer i's (attention, MLP) prefixes and lambda_1 / lambda_2 / output gate names in the released two-block
    layout (backbone.layers.{2i}.mixer, .{2i+1}.mixer), save_pretrained's (backbone.layers.{i}, g_proj) or the
    modules' (model.layers.{i})."""
    root = "backbone." if "backbone.embeddings.weight" in names else "model."
    a, m = f"{root}layers.{2 * i}.", f"{root}layers.{2 * i + 1}."
    if a + "mixer.q_proj.weight" in names:
        return a + "mixer.", m + "mixer.", a + "attn_alpha", m + "mlp_alpha", a + "mixer.g_proj.weight"
    p = f"{root}layers.{i}."
    g = _either(names, p + "self_attn.g_proj.weight", p + "self_attn.gate_proj.weight")
    return p + "self_attn.", p + "mlp.", p + "lambda_1", p + "lambda_2", g


def dory(cfg, names):
    """Dory: the looped nGPT, computed as transformers writes it. unit(x) = x / sqrt(sum x^2 + 1e-6); per layer
    x = unit(h); q, k = unit per head, RoPE (per layer type), q x (sqk sqrt(hd) / init)^2; the heads' output times
    sigmoid(gate x (s_gate D^(1/4) / init)^2), unit, o; h = x + |lambda_1 alpha / init| (unit(o) - x); y = unit(h);
    m = down unit(silu(gate y suv_gate sqrt(D)) up y suv_up sqrt(D)); h = y + |lambda_2 alpha / init| (unit(m) - y).
    Layers: the input section once, the recurrent one n_recurrent_loops times (each pass from unit(h) + unit(the
    input section's output)), the output section; logits = lm_head unit(h) x logit_scale / init."""
    H, KV, hd = heads(cfg)
    D, n, init = cfg["hidden_size"], cfg["num_hidden_layers"], get(cfg, "initializer_range", 0.0177)
    a_in, a_out, loops = get(cfg, "n_input_layers", 8), get(cfg, "n_output_layers", 8), get(cfg, "n_recurrent_loops", 2)
    rec = get(cfg, "n_recurrent_layers", n - a_in - a_out)
    types = layer_types(cfg, lambda i: "full_attention" if (i + 1) % 4 == 0 else "sliding_attention")
    ropes = {"full_attention": rope(cfg, hd, theta=get(cfg, "rope_theta", 1e7)),
             "sliding_attention": rope(cfg, hd, theta=get(cfg, "rope_local_base_freq", 1e4), scaling=None)}
    rate, w, act = get(cfg, "ngpt_alpha_init", 0.05) / init, get(cfg, "sliding_window", 1024), \
        activation(cfg, "hidden_act", "silu")
    bias = lambda name, on: name if on else None             # noqa: E731
    qb, mb = get(cfg, "attention_bias", False), get(cfg, "mlp_bias", False)
    unit = lambda x: x / np.sqrt((x * x).sum(-1, keepdims=True) + 1e-6)       # noqa: E731
    embed = _either(names, "backbone.embeddings.weight", "model.embed_tokens.weight")
    head = embed if get(cfg, "tie_word_embeddings", False) else "lm_head.weight"
    spec = ModelSpec("dory", H, KV, hd, embed, head, None, act=act, extra_names=("lm_head.logit_scale",))

    def layer(f, i, h):
        a, m, l1, l2, g = _dory_names(names, i)
        T, mm = h.shape[0], f.mm
        x = unit(h)
        q, k = (unit(mm(x, a + f"{c}_proj.weight", bias(a + f"{c}_proj.bias", qb)).reshape(T, -1, hd)) for c in "qk")
        v = mm(x, a + "v_proj.weight", bias(a + "v_proj.bias", qb)).reshape(T, KV, hd)
        r = ropes[types[i]]
        inv, factor = r.freqs(T)
        q, k = (ops.rotate(z, hd, inv, factor, False) for z in (q, k))
        q = q * ((f.w(a + "sqk") * np.sqrt(hd) / init) ** 2).reshape(H, hd)
        out = ops.attention(q, k, v, hd ** -0.5, 0.0, w if types[i] == "sliding_attention" else 0)
        out = out / (1.0 + np.exp(-mm(x, g) * (f.w(a + "s_gate") * D ** 0.25 / init) ** 2))
        o = mm(unit(out), a + "o_proj.weight", bias(a + "o_proj.bias", qb))
        h = x + np.abs(f.w(l1) * rate) * (unit(o) - x)
        y = unit(h)
        gt, up = (mm(y, m + f"{c}_proj.weight", bias(m + f"{c}_proj.bias", mb)) * f.w(m + f"suv_{c}") * np.sqrt(D)
                  for c in ("gate", "up"))
        mo = mm(unit(ops.act(act, gt) * up), m + "down_proj.weight", bias(m + "down_proj.bias", mb))
        return y + np.abs(f.w(l2) * rate) * (unit(mo) - y)

    def forward(f, ids):
        h = f.w(embed)[ids]
        for i in range(a_in):
            h = layer(f, i, h)
        first = unit(h)
        for _ in range(loops):
            h = unit(h) + first
            for i in range(a_in, a_in + rec):
                h = layer(f, i, h)
        for i in range(a_in + rec, n):
            h = layer(f, i, h)
        return f.mm(unit(h), head) * f.w("lm_head.logit_scale") / init

    spec.forward = forward
    # the unrolled layers' matrices by role (verify's depth and its matrix check); the forward above computes
    order = list(range(a_in)) + list(range(a_in, a_in + rec)) * loops + list(range(a_in + rec, n))
    for i in order:
        a, m, _, _, g = _dory_names(names, i)
        spec.layers.append(LayerSpec(**{c: a + f"{c}_proj.weight" for c in "qkvo"}, attn_gate=g,
                                     **{c: m + f"{c}_proj.weight" for c in ("gate", "up", "down")}))
    return spec


FAMILIES["dory"] = dory


def ergo(cfg, names):
    """Ergo: Gemma 2's four RMSNorms a layer (eps 1e-12) with gated residual adds, h = sigmoid(g) post(branch) +
    sqrt(1 + sigmoid(g)) exp(-softplus(g) / 2) h per channel; q / k RMS-normed per head, RoPE on adjacent pairs in
    the sliding layers, none in the full ones (q and k times sqrt(global_attention_scale) there when set); dense
    layers down(relu(up x)^2); sparse ones the top k of sigmoid(router) + e_score_correction_bias weighed by the
    sigmoids / (sum + 1e-20) x moe_routed_scaling_factor, each expert down(relu(up x)^2) RMS-normed with its own
    row of post_expert_norm, plus a shared one RMS-normed likewise; an untied head. Read under the modules' names,
    which the engine writes into its files (q / k / v split from qkv_proj, the experts one by one)."""
    H, KV, hd = heads(cfg)
    n, eps = cfg["num_hidden_layers"], get(cfg, "rms_norm_eps", 1e-12)
    every, nd = get(cfg, "global_attention_every_n_layers", 4), get(cfg, "num_dense_blocks", 1)
    types = layer_types(cfg, lambda i: "sliding_attention" if (i + 1) % every else "full_attention")
    kinds = get(cfg, "mlp_layer_types", ["dense" if i < nd else "sparse" for i in range(n)])
    E, w, gs = get(cfg, "num_experts", 256), get(cfg, "sliding_window", 512), cfg.get("global_attention_scale")
    r = rope(cfg, hd, theta=get(cfg, "rope_theta", 1e6), interleaved=True)
    spec = ModelSpec("ergo", H, KV, hd, "model.embed_tokens.weight", "lm_head.weight", rms("model.norm", eps),
                     act="relu2")
    for i in range(n):
        p = f"model.layers.{i}."
        L = LayerSpec(**{c: f"{p}self_attn.{c}_proj.weight" for c in "qkvo"})
        if kinds[i] == "sparse":
            x = p + "mlp.experts."
            L.moe = MoeSpec(p + "mlp.gate.linear.weight", [(None, f"{x}{e}.up_proj.weight", f"{x}{e}.down_proj.weight")
                                                           for e in range(E)], cfg["num_experts_per_tok"], True,
                            shared=(None, p + "mlp.shared_experts.up_proj.weight",
                                    p + "mlp.shared_experts.down_proj.weight"), act="relu2", scoring="sigmoid",
                            sel_bias=p + "mlp.gate.e_score_correction_bias", norm_eps=1e-20, plain=True,
                            routed_scale=get(cfg, "moe_routed_scaling_factor", 8 ** 0.5),
                            post_norm=x + "post_expert_norm.weight", sh_post_norm=p + "mlp.shared_experts.norm.weight",
                            post_norm_eps=eps)
        else:
            L.up, L.down = p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"
        spec.layers.append(L)

    def gated(f, name, branch, h):
        g = f.w(name)
        b = 1.0 / (1.0 + np.exp(-g))
        return b * branch + np.sqrt(1.0 + b) * np.exp(-0.5 * np.logaddexp(0.0, g)) * h

    def forward(f, ids):
        h, T = f.w(spec.embed)[ids], len(ids)
        for i, L in enumerate(spec.layers):
            p = f"model.layers.{i}."
            x = f.norm(h, rms(p + "input_layernorm", eps))
            q, k = (f.norm(f.mm(x, getattr(L, c)).reshape(T, -1, hd), rms(f"{p}self_attn.{c}_norm", eps))
                    for c in "qk")
            v = f.mm(x, L.v).reshape(T, KV, hd)
            if types[i] == "sliding_attention":
                inv, factor = r.freqs(T)
                q, k = (ops.rotate(z, hd, inv, factor, True) for z in (q, k))
            elif gs is not None:
                q, k = q * np.sqrt(gs), k * np.sqrt(gs)
            out = ops.attention(q, k, v, hd ** -0.5, 0.0, w if types[i] == "sliding_attention" else 0)
            a = f.norm(f.mm(out, L.o), rms(p + "post_attention_layernorm", eps))
            h = gated(f, p + "attention_residual_gate.weight", a, h)
            x = f.norm(h, rms(p + "pre_feedforward_layernorm", eps))
            m = f.moe(L, x) if L.moe else f.mm(ops.act("relu2", f.mm(x, L.up)), L.down)
            h = gated(f, p + "feedforward_residual_gate.weight", f.norm(m, rms(p + "post_feedforward_layernorm", eps)),
                      h)
        return f.mm(f.norm(h, spec.final_norm), spec.head)

    spec.forward = forward
    return spec


FAMILIES["ergo"] = ergo
