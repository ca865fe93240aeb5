"""Gemma 3n (text, `gemma3n_text`; Gemma3nForCausalLM), as transformers 5's modeling_gemma3n.py computes it.

Beside Gemma 3's block (q / k norms per head, sliding and full layers with their own RoPE bases, soft-capped logits)
a Gemma 3n model carries:

- AltUp: the hidden state is `altup_num_inputs` streams. Stream 0 is the scaled embedding, streams 1.. are
  `altup_projections` of it rescaled to its RMS magnitude. Each layer first *predicts* every stream from all of them
  (coefficients from a router: tanh(modality_router(rms(x_active) / hidden))), runs its block on the active
  prediction, then *corrects* every stream by the block's innovation (coefficients from the router of the output).
  At the end streams 1.. are unembedded (`altup_unembed_projections`, rescaled likewise) and the streams averaged.
- Per-layer inputs: a second embedding table `embed_tokens_per_layer` [vocab_size_per_layer_input, layers x P]
  (ids outside it read row 0) x sqrt(P), plus `per_layer_model_projection` of the embeddings x hidden^-1/2 normed
  per layer, summed and x 2^-1/2; layer i gates its slice (act(per_layer_input_gate(corrected active x
  correct_output_scale)) x slice), projects it back (`per_layer_projection`, normed) and adds it to streams 1..
- LAuReL: beside attention, normed + norm(linear_right(linear_left(normed))); the block's residual after attention
  is (x + attn + laurel) / sqrt(2).
- Activation sparsity: in layers whose `activation_sparsity_pattern` p > 0 the MLP's gate keeps only its values above
  mean + icdf(p) std of the row, shifted down by that cutoff (a gaussian top-k).
- KV sharing: the last `num_kv_shared_layers` layers compute no keys or values; each attends over the cache of the
  last earlier layer of its own type (sliding / full).
- Norms are x w (not Gemma's 1 + w); values are RMS-normed per head without a weight; attention scale 1;
  per-layer `intermediate_size`.

The new block kinds run as the plan's ALTUP_PREDICT, ALTUP_CORRECT, PLE and GEMMA_ROWS ops (kernels/altup.c). One
description of the step (`_describe`) feeds both the plan and the per-op path (`oracle=True`), so the two cannot
drift apart. A layer that shares its KV still owns a (never written) cache slot: memory a model with 15 shared layers
of 30 could save later.
"""
import numpy as np

from petit.models.blocks.common import default_rope, norm
from petit.models.blocks.decoder import Arch, Norm
from petit.models.blocks.gemma3n_decoder import AltUp, Gemma3nDecoder, Gemma3nLayer, sparsity_multiplier
from petit.models.families.dense.gemma3n_config import Gemma3nTextConfig



def build(cfg: Gemma3nTextConfig, t, prefix: str = "model."):
    D, n_layers, eps = cfg.hidden_size, cfg.num_hidden_layers, cfg.rms_norm_eps
    H, KV, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    n, P, R = cfg.altup_num_inputs, cfg.hidden_size_per_layer_input, cfg.laurel_rank
    E = t.weight(prefix + "embed_tokens.weight", (cfg.vocab_size, D))
    full, local = default_rope(cfg), default_rope(cfg, base=cfg.rope_local_base_freq, scaling=None)
    types, src = cfg.types(), cfg.kv_sources()
    rms = lambda name, width=D: norm(t, name, width, "rms", eps)     # noqa: E731  (x w: not Gemma's 1 + w)
    layers = []
    for i in range(n_layers):
        p = f"{prefix}layers.{i}."
        a = p + "self_attn."
        F = cfg.sizes[i]
        shared = src[i] != i
        L = Gemma3nLayer(q=t.weight(a + "q_proj.weight", (H * hd, D)),
                         k=None if shared else t.weight(a + "k_proj.weight", (KV * hd, D)),
                         v=None if shared else t.weight(a + "v_proj.weight", (KV * hd, D)),
                         o=t.weight(a + "o_proj.weight", (D, H * hd)),
                         gate=t.weight(p + "mlp.gate_proj.weight", (F, D)),
                         up=t.weight(p + "mlp.up_proj.weight", (F, D)),
                         down=t.weight(p + "mlp.down_proj.weight", (D, F)),
                         rope=local if types[i] == "sliding_attention" else full,
                         window=cfg.sliding_window if types[i] == "sliding_attention" else 0)
        L.q_norm = rms(a + "q_norm", hd)
        if not shared:
            L.k_norm, L.v_norm = rms(a + "k_norm", hd), Norm("rms", eps)
        L.attn_norm, L.post_attn_norm = rms(p + "input_layernorm"), rms(p + "post_attention_layernorm")
        L.mlp_norm, L.post_mlp_norm = rms(p + "pre_feedforward_layernorm"), rms(p + "post_feedforward_layernorm")
        u = p + "altup."
        L.altup = AltUp(t.vec(u + "router_norm.weight", (D,)), t.vec(u + "modality_router.weight", (n, D)),
                        t.vec(u + "prediction_coefs.weight", (n * n, n)), t.vec(u + "correction_coefs.weight", (n, n)),
                        t.vec(u + "correct_output_scale", (D,)) if cfg.altup_correct_scale else None, eps,
                        cfg.altup_active_idx)
        if not cfg.altup_correct_scale and t.has(u + "correct_output_scale"):
            t.vec(u + "correct_output_scale", (D,))     # present but not used by the computation
        L.laurel_left = t.weight(p + "laurel.linear_left.weight", (R, D))
        L.laurel_right = t.weight(p + "laurel.linear_right.weight", (D, R))
        L.laurel_norm = rms(p + "laurel.post_laurel_norm")
        L.ple_gate = t.weight(p + "per_layer_input_gate.weight", (P, D))
        L.ple_proj = t.weight(p + "per_layer_projection.weight", (D, P))
        L.ple_norm = rms(p + "post_per_layer_input_norm")
        L.kv_source = src[i]
        L.sparsity = sparsity_multiplier(cfg.sparsity[i]) if cfg.sparsity[i] > 0 else 0.0
        layers.append(L)
    table = t.weight(prefix + "embed_tokens_per_layer.weight", (cfg.vocab_size_per_layer_input, n_layers * P))
    model_proj = t.weight(prefix + "per_layer_model_projection.weight", (n_layers * P, D))
    ple_norm = rms(prefix + "per_layer_projection_norm", P)
    altup_proj = [t.weight(f"{prefix}altup_projections.{j}.weight", (D, D)) for j in range(n - 1)]
    altup_unembed = [t.weight(f"{prefix}altup_unembed_projections.{j}.weight", (D, D)) for j in range(n - 1)]
    final = rms(prefix + "norm")
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=max(cfg.sizes), num_attention_heads=H,
                num_key_value_heads=KV, head_dim=hd, context_length=full.context_length, act=cfg.act,
                attn_scale=1.0, embed_scale=float(np.float32(D ** 0.5)),
                logit_softcap=cfg.final_logit_softcapping or 0.0)
    scales = (float(np.float32(D ** -0.5)), float(np.float32(P ** 0.5)), float(np.float32(1 / np.sqrt(np.float32(2)))))
    return Gemma3nDecoder(arch, E, layers, final, head, ple_table=table, ple_model_proj=model_proj, ple_norm=ple_norm,
                          altup_proj=altup_proj, altup_unembed=altup_unembed, n_streams=n, ple_width=P,
                          laurel_rank=R, ple_scales=scales)


Config = Gemma3nTextConfig
