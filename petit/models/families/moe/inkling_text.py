"""Inkling (Thinking Machines, `inkling_text`; InklingForCausalLM), as transformers 5.25's modeling_inkling.py
computes it: no position embedding and no RoPE; positions come from short convolutions and a relative bias.

- the embedding RMS-normed (embed_tokens.embed_norm);
- per layer, by `layer_types` ("hybrid_sliding": swa_* heads and head_dim, a window of sliding_window_size;
  "hybrid": the full ones): RMSNorm, q = q_proj x; k, v = short causal depthwise convs (conv_kernel_size) of k_proj x,
  v_proj x plus themselves, a state per sequence; RMSNorm on each head of q and k; scores q.k / head_dim plus each
  query's r_proj x (d_rel a head) times the bank rel_logits_proj.proj at the key's distance (rel_extent in the full
  layers, the window in the sliding ones, 0 beyond); the full layers' scores x 1 + log_scaling_alpha ln(max((p + 1) /
  log_scaling_n_floor, 1)) when log_scaling_n_floor is set (kernels/fam36l.c's pt_rel_attention); o_proj, then the
  attn_sconv (conv + itself) before the residual add;
- the MLP (`mlp_layer_types`): dense, a gated MLP times its global_scale; or sparse, n_routed_experts experts (3-D
  gate_up_proj / down_proj) and n_shared_experts shared ones ([S, moe_intermediate_size, hidden]), one router over
  both: the top num_experts_per_tok routed of sigmoid + e_score_correction_bias, weighed with the shared ones by their
  sigmoids over the sum of all of theirs, x route_scale x the router's global_scale. Petit's MoE runs the shared
  experts as routed ones every token chooses (a selection bias of 1e30); then the mlp_sconv before the residual add;
- final RMSNorm, / logits_mup_width_multiplier, the LM head (never tied), its rows cut to unpadded_vocab_size when
  that is smaller (the embedding's too: the padded rows are no token's).
The multi-token-prediction layers (num_mtp_layers) are not run, as transformers' causal LM has none.
"""
import numpy as np

from petit.models.blocks.config import ACT_NAMES
from petit.models.blocks.decoder import Arch, Norm, Vec
from petit.models.families.moe.inkling_block import (BIG, InklingDecoder, InkLayer, RelAttn, SConv, conv_taps,
                                                     expert_parts)
from petit.models.families.moe.inkling_config import InklingTextConfig
from petit.models.blocks.moe import Moe
from petit.native import ACTIVATIONS


def hf_tensors(cfg: InklingTextConfig, ckpt) -> dict:
    """The routed experts' matrices from the 3-D gate_up_proj / down_proj, the shared ones' from their [S, ...]
    tensors; the embedding and head cut to unpadded_vocab_size rows when it is smaller."""
    out, D, I = {}, cfg.hidden_size, cfg.moe_intermediate_size
    for i in range(cfg.num_hidden_layers):
        if cfg.mlp_layer_types[i] == "sparse":
            x, sh = f"model.layers.{i}.mlp.experts", f"model.layers.{i}.mlp.shared_experts"
            out |= expert_parts(ckpt, cfg.n_routed_experts, {
                x + ".{e}.gate_proj.weight": ((I, D), x + ".gate_up_proj", slice(0, I)),
                x + ".{e}.up_proj.weight": ((I, D), x + ".gate_up_proj", slice(I, 2 * I)),
                x + ".{e}.down_proj.weight": ((D, I), x + ".down_proj", None)})
            out |= expert_parts(ckpt, cfg.n_shared_experts, {
                f"{sh}.{{e}}.{m}.weight": (shape, f"{sh}.{m}", None) for m, shape in
                (("gate_proj", (I, D)), ("up_proj", (I, D)), ("down_proj", (D, I)))})
    V = cfg.rows()
    if V < cfg.vocab_size:
        for name in ("model.embed_tokens.weight", "lm_head.weight"):
            out[name] = ((V, D), lambda name=name: ckpt.f32(name)[:V], [name])
    return out


class InklingTextDecoder(InklingDecoder):
    extra = {}

    def _describe(self, s, scratch) -> None:
        arch, buf, cap = self.arch, scratch.p, scratch.cap
        D, n = arch.hidden_size, len(self.layers)
        s.embed(self.embed, buf["resid"], D, 1.0, None)
        s.norm(-1, self.embed_norm, buf["resid"], 1, D, buf["resid"])
        for i, L in enumerate(self.layers):
            H, KV, hd = L.ink_heads
            s.norm(i, L.attn_norm, buf["resid"], 1, D, buf["normed"])
            s.matmul(i, [L.q, L.k, L.v], buf["normed"], [buf["q"], buf["k"], buf["v"]])
            s.matmul(i, [L.r], buf["normed"], [buf["rel"]])
            s.sconv(i, L.k_conv, n + i, buf["k"])
            s.sconv(i, L.v_conv, n + i, buf["v"])
            s.norm(i, L.q_norm, buf["q"], H, hd, buf["q"])
            s.norm(i, L.k_norm, buf["k"], KV, hd, buf["k"])
            s.store(i, buf["q"], buf["k"], buf["v"], H, KV, hd)
            s.rel_attention(i, L.rel, buf["q"], buf["rel"], None, buf["att"])
            s.matmul(i, [L.o], buf["att"], [buf["branch"]])
            s.sconv(i, L.attn_conv, n + i, buf["branch"])
            s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            s.norm(i, L.mlp_norm, buf["resid"], 1, D, buf["normed"])
            if L.moe is not None:
                s.moe(i, L.moe.c(cap), buf["normed"], buf["branch"])
            else:
                F = L.up.shape[0]
                s.matmul(i, [L.gate, L.up], buf["normed"], [buf["gate"], buf["up"]])
                s.glu(i, ACTIVATIONS[arch.act], buf["gate"], buf["up"], F, buf["mlp_hidden"])
                s.matmul(i, [L.down], buf["mlp_hidden"], [buf["branch"]])
                s.scale_cols(i, buf["branch"], L.mlp_scale, D)
            s.sconv(i, L.mlp_conv, n + i, buf["branch"])
            s.axpy(i, buf["resid"], 1.0, buf["branch"], D)


def build(cfg: InklingTextConfig, t):
    n, D, eps, K = cfg.num_hidden_layers, cfg.hidden_size, cfg.rms_norm_eps, cfg.conv_kernel_size
    E, S, I, V = cfg.n_routed_experts, cfg.n_shared_experts, cfg.moe_intermediate_size, cfg.rows()
    act = ACT_NAMES[cfg.hidden_act]
    shapes = [cfg.shape(i) for i in range(n)]
    kv_row = max(kv * hd for _, kv, hd in shapes)
    rms = lambda name, width=D: Norm("rms", eps, t.vec(name + ".weight", (width,)))     # noqa: E731
    emb = t.weight("model.embed_tokens.weight", (V, D))
    layers, names = [], {}
    for i in range(n):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        H, KV, hd = shapes[i]
        sliding = cfg.layer_types[i] == "hybrid_sliding"
        extent = cfg.sliding_window_size if sliding else cfg.rel_extent
        L = InkLayer(q=t.weight(a + "q_proj.weight", (H * hd, D)), k=t.weight(a + "k_proj.weight", (KV * hd, D)),
                     v=t.weight(a + "v_proj.weight", (KV * hd, D)), o=t.weight(a + "o_proj.weight", (D, H * hd)))
        L.ink_heads, L.r = (H, KV, hd), t.weight(a + "r_proj.weight", (H * cfg.d_rel, D))
        names[i, "r"] = a + "r_proj.weight"
        floor = 0 if sliding or cfg.log_scaling_n_floor is None else cfg.log_scaling_n_floor
        L.rel = RelAttn((H, KV, hd), t.array(a + "rel_logits_proj.proj", (cfg.d_rel, extent)),
                        cfg.sliding_window_size if sliding else 0, 1.0 / hd, floor, cfg.log_scaling_alpha)
        L.k_conv = SConv(conv_taps(t, a + "k_sconv.conv1d.weight", KV * hd, K), False, 0)
        L.v_conv = SConv(conv_taps(t, a + "v_sconv.conv1d.weight", KV * hd, K), False, (K - 1) * kv_row)
        L.q_norm, L.k_norm = rms(a + "q_norm", hd), rms(a + "k_norm", hd)
        L.attn_norm, L.mlp_norm = rms(p + "input_layernorm"), rms(p + "post_attention_layernorm")
        if cfg.mlp_layer_types[i] == "sparse":
            m, x = p + "mlp.", p + "mlp.experts."
            gates = [f"{x}{e}." for e in range(E)] + [f"{m}shared_experts.{e}." for e in range(S)]
            L.moe = Moe(t.float_weight(m + "gate.weight", (E + S, D)),
                        [t.weight(g + "gate_proj.weight", (I, D)) for g in gates],
                        [t.weight(g + "up_proj.weight", (I, D)) for g in gates],
                        [t.weight(g + "down_proj.weight", (D, I)) for g in gates], cfg.num_experts_per_tok + S, True,
                        act, scoring="sigmoid")
            bias = t.array(m + "gate.e_score_correction_bias", (E,))
            L.moe.sel_bias = Vec(np.concatenate([bias, np.full(S, BIG, np.float32)]))
            L.moe.routed_scale = float(np.float32(cfg.route_scale) * t.array(m + "gate.global_scale", (1,))[0])
        else:
            F, m = cfg.intermediate_size, p + "mlp."
            L.gate, L.up = t.weight(m + "gate_proj.weight", (F, D)), t.weight(m + "up_proj.weight", (F, D))
            L.down = t.weight(m + "down_proj.weight", (D, F))
            L.mlp_scale = Vec(np.full(D, t.array(m + "global_scale", (1,))[0], np.float32))
        L.attn_conv = SConv(conv_taps(t, p + "attn_sconv.conv1d.weight", D, K), True, 0)
        L.mlp_conv = SConv(conv_taps(t, p + "mlp_sconv.conv1d.weight", D, K), True, (K - 1) * D)
        layers.append(L)
    head = t.weight("lm_head.weight", (V, D))
    arch = Arch(vocab_size=V, hidden_size=D, intermediate_size=max([cfg.intermediate_size, I]),
                num_attention_heads=max(s[0] for s in shapes), num_key_value_heads=max(s[1] for s in shapes),
                head_dim=max(s[2] for s in shapes), context_length=cfg.max_position_embeddings, act=act,
                logit_scale=float(np.float32(1.0 / cfg.logits_mup_width_multiplier)),
                state_shapes=((max(K - 1, 1), 2 * kv_row), (max(K - 1, 1), 2 * D)),
                state_layers=tuple(range(n, 2 * n)), cache_slots=2 * n)
    dec = InklingTextDecoder(arch, emb, layers, rms("model.norm"), head, names=names,
                             embed_norm=rms("model.embed_tokens.embed_norm"))
    dec.extra, dec.routing_reach = {"rel": arch.num_attention_heads * cfg.d_rel}, K - 1
    return dec


Config = InklingTextConfig
