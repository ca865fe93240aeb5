"""The dense group of issue 30 (families transformers 5 added close to one of llama.py's), each written from its
transformers 5.25 modeling file: granite_swa (Granite's multipliers, per-layer sliding windows, attention sinks, a
RoPE base per layer with 0 for none), granitemoe_swa (the same attention over granitemoeshared's experts), nanochat
(weightless RMS norms everywhere, q/k norms after a RoPE turning the other way, a plain fc1 / fc2 MLP),
apertus1p5_text (Apertus with its LM head pruned to output_vocab_size rows: the logits are the head's width, and
transformers 5 does not round xIELU's parameters to bfloat16), cwm (Llama with sliding layers, full when i % 4 == 0,
llama3 RoPE by default), youtu (DeepSeek-V3's latent attention with a dense MLP in every layer, tied by default),
iquestcoder (Llama itself), hyperclovax (Granite with norms of each sublayer's output and multiplied logits), jais2
(LayerNorms with biases, a plain relu² MLP, biases everywhere), minicpm (Llama with scale_emb, scale_depth /
sqrt(layers) on each residual, logits / (hidden / dim_model_base); from its remote code, as llama.cpp runs it),
internlm2 (Llama; its fused grouped wqkv and own names are stored split under Llama's in a `.petit` file)."""
from trainer.reference.families.common import activation, get, heads, layer_types, layer, rms, rope
from trainer.reference.families.deepseek import _deepseek
from trainer.reference.families.llama import llama, llama_like
from trainer.reference.families.llama_variants import apertus
from trainer.reference.spec import MoeSpec, NormSpec, RopeSpec


def _granite_swa_kw(cfg) -> dict:
    """llama_like's per-layer RoPE, windows and Granite's multipliers for GraniteSWA's attention: layer_types (by
    default full when i % 4 == 0), layer_rope_theta (0: no RoPE in that layer; by default rope_theta everywhere)."""
    n, hd = cfg["num_hidden_layers"], heads(cfg)[2]
    types = layer_types(cfg, lambda i: "full_attention" if i % 4 == 0 else "sliding_attention")
    w = get(cfg, "sliding_window", 128)
    thetas = cfg.get("layer_rope_theta") or [get(cfg, "rope_theta", 10000.0)] * n
    pairs = get(cfg, "rope_interleaved", False)          # a GGUF file's q / k rows
    ropes = {th: rope(cfg, hd, theta=th, interleaved=pairs) for th in set(thetas) if th}
    bias = get(cfg, "attention_bias", False)
    return dict(qkv_bias=bias, o_bias=bias, rope_of=lambda i: ropes.get(thetas[i]),
                window_of=lambda i: w if types[i] == "sliding_attention" else 0,
                embed_scale=get(cfg, "embedding_multiplier", 1.0), attn_scale=get(cfg, "attention_multiplier", 1.0),
                residual_scale=get(cfg, "residual_multiplier", 1.0),
                logit_scale=1.0 / get(cfg, "logits_scaling", 1.0))


def _sinks(spec):
    for i, L in enumerate(spec.layers):
        L.sinks = f"model.layers.{i}.self_attn.sinks"
    return spec


def granite_swa(cfg, names):
    return _sinks(llama_like(cfg, names, "granite_swa", eps=get(cfg, "rms_norm_eps", 1e-5),
                             mlp_bias=get(cfg, "mlp_bias", False), tied=True, **_granite_swa_kw(cfg)))


def granitemoe_swa(cfg, names):
    """The experts as the engine stores them (split per expert; the router as router.layer), a shared MLP of
    shared_intermediate_size (0: none) added unweighted."""
    S, E, b = get(cfg, "shared_intermediate_size", 0), cfg["num_local_experts"], "block_sparse_moe"

    def moe(i, p):
        shared = tuple(f"{p}shared_mlp.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj")) if S else None
        return MoeSpec(f"{p}{b}.router.layer.weight",
                       [tuple(f"{p}{b}.experts.{e}.{x}.weight" for x in ("gate_proj", "up_proj", "down_proj"))
                        for e in range(E)], cfg["num_experts_per_tok"], True, shared)
    return _sinks(llama_like(cfg, names, "granitemoe_swa", eps=get(cfg, "rms_norm_eps", 1e-6), moe_of=moe,
                             **_granite_swa_kw(cfg)))


def nanochat(cfg, names):
    """rotate_half(x) = cat(x2, -x1): each pair turns by -angle, which is RoPE with its frequencies negated."""
    eps, hd = get(cfg, "rms_norm_eps", 1e-6), heads(cfg)[2]
    r = rope(cfg, hd)
    turned = RopeSpec(r.dim, lambda n: (lambda f: (-f[0], f[1]))(r.freqs(n)))
    bias = get(cfg, "attention_bias", False)
    spec = llama_like(cfg, names, "nanochat", eps=eps, qkv_bias=bias, o_bias=bias, rope_of=lambda i: turned,
                      plain_mlp=True, norm=lambda name: NormSpec("rms", eps, None),
                      act=activation(cfg, "hidden_act", "relu2"), embed_norm=NormSpec("rms", eps, None),
                      logit_softcap=cfg.get("final_logit_softcapping", 15.0) or 0.0)     # null: no cap
    for i, L in enumerate(spec.layers):
        p = f"model.layers.{i}.mlp."
        L.up, L.down, L.norm_after_rope = p + "fc1.weight", p + "fc2.weight", True
        L.q_norm = L.k_norm = NormSpec("rms", eps, None)
    return spec


def apertus1p5_text(cfg, names):
    spec = apertus(dict(cfg, xielu_bf16=get(cfg, "xielu_bf16", False)), names)
    spec.family = "apertus1p5_text"
    return spec


def cwm(cfg, names):
    hd = heads(cfg)[2]
    scaling = cfg.get("rope_scaling", {"rope_type": "llama3", "factor": 16.0, "high_freq_factor": 4.0,
                                       "low_freq_factor": 1.0, "original_max_position_embeddings": 8192})
    r = rope(dict(cfg, rope_theta=get(cfg, "rope_theta", 1e6), rope_scaling=scaling), hd)
    types = layer_types(cfg, lambda i: "full_attention" if i % 4 == 0 else "sliding_attention")
    w = get(cfg, "sliding_window", 8192)
    return llama_like(cfg, names, "cwm", eps=get(cfg, "rms_norm_eps", 1e-5), mlp_bias=get(cfg, "mlp_bias", False),
                      rope_of=lambda i: r, window_of=lambda i: w if types[i] == "sliding_attention" else 0)


def youtu(cfg, names):
    return _deepseek(dict(cfg, tie_word_embeddings=get(cfg, "tie_word_embeddings", True), n_routed_experts=None),
                     names, "youtu", v3=True)


def iquestcoder(cfg, names):
    spec = llama(dict(cfg, rms_norm_eps=get(cfg, "rms_norm_eps", 1e-5)), names)
    spec.family = "iquestcoder"
    return spec


def hyperclovax(cfg, names):
    """attention_multiplier null: head_dim^-0.5; use_post_norm: post_norm1 / post_norm2 on the sublayers' outputs,
    before the residual multiplier; logits times logits_scaling."""
    eps, bias, hd = get(cfg, "rms_norm_eps", 1e-6), get(cfg, "attention_bias", False), heads(cfg)[2]
    r = rope(cfg, hd)
    spec = llama_like(cfg, names, "hyperclovax", eps=eps, qkv_bias=bias, o_bias=bias,
                      mlp_bias=get(cfg, "mlp_bias", False), rope_of=lambda i: r,
                      embed_scale=get(cfg, "embedding_multiplier", 1.0),
                      attn_scale=get(cfg, "attention_multiplier", hd ** -0.5),
                      residual_scale=get(cfg, "residual_multiplier", 1.0), logit_scale=get(cfg, "logits_scaling", 1.0))
    if get(cfg, "use_post_norm", True):
        for i, L in enumerate(spec.layers):
            L.post_attn_norm = rms(f"model.layers.{i}.post_norm1", eps)
            L.post_mlp_norm = rms(f"model.layers.{i}.post_norm2", eps)
    return spec


def jais2(cfg, names):
    eps, abias, mbias = get(cfg, "layer_norm_eps", 1e-5), get(cfg, "attention_bias", True), get(cfg, "mlp_bias", True)
    r = rope(cfg, heads(cfg)[2])
    return llama_like(cfg, names, "jais2", eps=eps, qkv_bias=abias, o_bias=abias, mlp_bias=mbias, rope_of=lambda i: r,
                      plain_mlp=True, act=activation(cfg, "hidden_act", "relu2"),
                      norm=lambda name: layer(name, eps, names))


def minicpm(cfg, names):
    r = rope(cfg, heads(cfg)[2], interleaved=get(cfg, "rope_interleaved", False))     # a GGUF file's pairs
    return llama_like(cfg, names, "minicpm", eps=get(cfg, "rms_norm_eps", 1e-6), rope_of=lambda i: r, tied=True,
                      embed_scale=get(cfg, "scale_emb", 1.0),
                      residual_scale=get(cfg, "scale_depth", 1.0) / cfg["num_hidden_layers"] ** 0.5,
                      logit_scale=get(cfg, "dim_model_base", 1.0) / cfg["hidden_size"])


def internlm2(cfg, names):
    spec = llama(cfg, names)
    spec.family = "internlm2"
    return spec


FAMILIES = {"granite_swa": granite_swa, "granitemoe_swa": granitemoe_swa, "nanochat": nanochat,
            "apertus1p5_text": apertus1p5_text, "cwm": cwm, "youtu": youtu,
            "iquestcoder": iquestcoder, "hyperclovax": hyperclovax, "jais2": jais2,
            "minicpm": minicpm, "internlm2": internlm2}
