"""Gemma 4 (text, `gemma4_text`; Gemma4ForCausalLM), as transformers 5's modeling_gemma4.py computes it.

Gemma 3's sandwich block (x w norms, not 1 + w) with what Gemma 4 adds:

- per-layer attention shapes (`per_layer_config`, by default the full layers' `global_head_dim` and, with
  `attention_k_eq_v`, `num_global_key_value_heads`): the KV cache holds each layer's heads in a slot sized for the
  widest layer;
- `attention_k_eq_v`: the full layers have no v_proj; their values are the keys before the key norm, RMS-normed
  without weight as every layer's values are;
- proportional RoPE on the full layers: frequencies base^(-2i / head_dim) for the first partial_rotary_factor x
  head_dim / 2 pairs (i, i + head_dim / 2) of the whole head, the other pairs not rotated;
- per-layer inputs as Gemma 3n's (`embed_tokens_per_layer` x sqrt(P) plus the normed `per_layer_model_projection`
  of the embeddings, x 2^-1/2), each layer adding norm(per_layer_projection(act(per_layer_input_gate(x)) x its
  slice)) to its residual after the MLP (`hidden_size_per_layer_input` 0: none);
- KV sharing of the last `num_kv_shared_layers` layers (as Gemma 3n's), whose MLPs are twice as wide with
  `use_double_wide_mlp`;
- `layer_scalar`: each layer's output times a learned scalar.

- routed experts beside the MLP (`enable_moe_block`, Gemma 4 26B-A4B): the block's input (the residual before the
  MLP) goes through `pre_feedforward_layernorm_2` to the experts and, RMS-normed without weight x `router.scale` /
  sqrt(hidden), to the router (softmax, top-k renormalised, x `router.per_expert_scale`); the MLP's output
  (`post_feedforward_layernorm_1`) and the experts' (`post_feedforward_layernorm_2`) are summed before
  `post_feedforward_layernorm`. Petit's MoE kernel runs it on the normed input: the router's scale over the norm's
  weight is folded into the router's columns (`router.folded`) and each expert's per_expert_scale into its down
  matrix, when read (hf_tensors); the router stays float32.
"""
import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.decoder import Arch, Norm
from petit.models.blocks.moe import Moe
from petit.models.families.dense.gemma4_config import Gemma4TextConfig
from petit.models.families.dense.gemma4_decoder import Gemma4Decoder, Gemma4Layer
from petit.models.families.dense.gemma4_rope import layer_ropes


def hf_tensors(cfg: Gemma4TextConfig, ckpt, name=lambda n: n) -> dict:
    """The experts of each MoE layer as Petit's MoE kernel reads them: each expert's gate / up / down from
    transformers 5's 3-D `experts.gate_up_proj` [E, 2F, D] and `experts.down_proj` [E, D, F] (down x its
    router.per_expert_scale), and `router.folded` = router.proj x router.scale / (sqrt(hidden) x
    pre_feedforward_layernorm_2.weight) per column, the router on the experts' normed input. `name` maps a text
    model's name to the checkpoint's (the wrapper's model.language_model.)."""
    if not cfg.enable_moe_block:
        return {}
    E, F, D = cfg.num_experts, cfg.moe_intermediate_size, cfg.hidden_size
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        fused, down = name(p + "experts.gate_up_proj"), name(p + "experts.down_proj")
        proj, scale, pes = name(p + "router.proj.weight"), name(p + "router.scale"), name(p + "router.per_expert_scale")
        w2 = name(p + "pre_feedforward_layernorm_2.weight")
        held = {}

        def part(src, e, rows=None, mul=None, held=held):
            def make():
                if src not in held:
                    held.clear()
                    held[src] = ckpt.f32(src)
                a = held[src][e, rows[0]:rows[1]] if rows else held[src][e]
                return a * ckpt.f32(mul).reshape(-1)[e] if mul else a
            return make

        def folded(proj=proj, scale=scale, w2=w2):
            w = ckpt.f32(w2).astype(np.float64)
            if (w == 0).any():
                raise ValueError(f"{w2} has a zero: the router cannot be folded onto the experts' normed input")
            k = ckpt.f32(scale).astype(np.float64) * D ** -0.5 / w
            return (ckpt.f32(proj).astype(np.float64) * k[None, :]).astype(np.float32)

        for e in range(E):
            x = f"{p}experts.{e}."
            out[x + "gate_proj.weight"] = ((F, D), part(fused, e, (0, F)), [fused])
            out[x + "up_proj.weight"] = ((F, D), part(fused, e, (F, 2 * F)), [fused])
            out[x + "down_proj.weight"] = ((D, F), part(down, e, mul=pes), [down, pes])
        out[p + "router.folded.weight"] = ((E, D), folded, [proj, scale, w2])
    return out


def build(cfg: Gemma4TextConfig, t, prefix: str = "model."):
    D, n_layers, eps = cfg.hidden_size, cfg.num_hidden_layers, cfg.rms_norm_eps
    H, P = cfg.num_attention_heads, cfg.hidden_size_per_layer_input or 0
    E = t.weight(prefix + "embed_tokens.weight", (cfg.vocab_size, D))
    types, src = cfg.types(), cfg.kv_sources()
    first_shared = n_layers - cfg.num_kv_shared_layers
    rms = lambda name, width=D: norm(t, name, width, "rms", eps)     # noqa: E731  (x w: not Gemma's 1 + w)
    rope_of = layer_ropes(cfg)

    layers = []
    for i in range(n_layers):
        p = f"{prefix}layers.{i}."
        a = p + "self_attn."
        hd, KV = cfg.shapes[i]
        own = src[i] == i
        k_eq_v = cfg.attention_k_eq_v and types[i] == "full_attention"
        F = cfg.intermediate_size * (2 if cfg.use_double_wide_mlp and i >= first_shared else 1)
        L = Gemma4Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)),
                        k=t.weight(a + "k_proj.weight", (KV * hd, D)) if own else None,
                        v=t.weight(a + "v_proj.weight", (KV * hd, D)) if own and not k_eq_v else None,
                        o=t.weight(a + "o_proj.weight", (D, H * hd)),
                        gate=t.weight(p + "mlp.gate_proj.weight", (F, D)),
                        up=t.weight(p + "mlp.up_proj.weight", (F, D)),
                        down=t.weight(p + "mlp.down_proj.weight", (D, F)),
                        rope=rope_of(types[i], hd),
                        window=cfg.sliding_window if types[i] == "sliding_attention" else 0)
        L.heads, L.k_eq_v, L.kv_source = (hd, KV), k_eq_v, src[i]
        L.q_norm = rms(a + "q_norm", hd)
        if own:
            L.k_norm, L.v_norm = rms(a + "k_norm", hd), Norm("rms", eps)
        L.attn_norm, L.post_attn_norm = rms(p + "input_layernorm"), rms(p + "post_attention_layernorm")
        L.mlp_norm, L.post_mlp_norm = rms(p + "pre_feedforward_layernorm"), rms(p + "post_feedforward_layernorm")
        if cfg.enable_moe_block:
            n_exp, Fe = cfg.num_experts, cfg.moe_intermediate_size
            x = p + "experts."
            L.moe = Moe(t.float_weight(p + "router.folded.weight", (n_exp, D)),
                        [t.weight(f"{x}{e}.gate_proj.weight", (Fe, D)) for e in range(n_exp)],
                        [t.weight(f"{x}{e}.up_proj.weight", (Fe, D)) for e in range(n_exp)],
                        [t.weight(f"{x}{e}.down_proj.weight", (D, Fe)) for e in range(n_exp)],
                        cfg.top_k_experts, True, act=cfg.act)
            L.mlp_out_norm = rms(p + "post_feedforward_layernorm_1")
            L.moe_in_norm = rms(p + "pre_feedforward_layernorm_2")
            L.moe_out_norm = rms(p + "post_feedforward_layernorm_2")
        if P:
            L.ple_gate = t.weight(p + "per_layer_input_gate.weight", (P, D))
            L.ple_proj = t.weight(p + "per_layer_projection.weight", (D, P))
            L.ple_norm = rms(p + "post_per_layer_input_norm")
        if t.has(p + "layer_scalar"):
            L.scalar = float(t.vec(p + "layer_scalar", (1,)).a[0])
        layers.append(L)
    table = model_proj = ple_norm = None
    if P:
        table = t.weight(prefix + "embed_tokens_per_layer.weight", (cfg.vocab_size_per_layer_input, n_layers * P))
        model_proj = t.weight(prefix + "per_layer_model_projection.weight", (n_layers * P, D))
        ple_norm = rms(prefix + "per_layer_projection_norm", P)
    final = rms(prefix + "norm")
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    hd_max, kv_max = max(s[0] for s in cfg.shapes), max(s[1] for s in cfg.shapes)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=max(L.up.shape[0] for L in layers),
                num_attention_heads=H, num_key_value_heads=kv_max, head_dim=hd_max,
                context_length=cfg.max_position_embeddings, act=cfg.act, attn_scale=1.0,
                embed_scale=float(np.float32(D ** 0.5)), logit_softcap=cfg.final_logit_softcapping or 0.0)
    scales = (float(np.float32(D ** -0.5)), float(np.float32(P ** 0.5)) if P else 1.0,
              float(np.float32(2.0 ** -0.5)))
    return Gemma4Decoder(arch, E, layers, final, head, ple_table=table, ple_model_proj=model_proj, ple_norm=ple_norm,
                         ple_width=P, ple_scales=scales)


Config = Gemma4TextConfig
