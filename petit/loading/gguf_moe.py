"""GGUF files of the mixture-of-experts families with their own attention or routing: llama.cpp's deepseek2
(DeepSeek-V2 and V3, Kimi-K2: multi-head latent attention), read as Petit's deepseek_v3 family, llama4 (Llama 4
Scout / Maverick's text model), read as llama4_text, and glm4moe (GLM-4.5, DeepSeek-V3's router), hunyuan-moe,
ernie4_5-moe and dbrx, read as their families with llama.cpp's fixed routers (each reader's docstring says how).
Imported by gguf_archs, whose ARCHS these join.

What the files hold and what llama.cpp assumes (src/models/deepseek2.cpp, llama-context.cpp, llama-graph.cpp's
build_moe_ffn), reproduced here:

- the latent attention's matrices as its absorbed form needs them: `attn_k_b` [heads, rank, nope] (each head's
  W_uk^T) and `attn_v_b` [heads, v, rank] (W_uv), read by head as the family's `k_absorb.{h}` / `v_absorb.{h}`
  without a copy; `attn_kv_a_mqa` is the latent rows then the rope rows (kv_c | kv_pe), and each head's rows of
  `attn_q_b` (or V2-Lite's `attn_q`) are nope then rope (q_nope / q_pe: joined by rows, a copy).
- the router as llama.cpp runs it whatever the original config said: the softmax of the logits unless
  `expert_gating_func` says sigmoid (transformers saves no `scoring_func` for DeepSeek-V3, so its files run softmax;
  the Hub's configs say sigmoid), the choice made on those plus `exp_probs_b` where the file has it, limited to the
  `expert_group_used_count` of `expert_group_count` groups whose best two scores sum highest (V3's rule, also for
  V2's files), renormalised only with `expert_weights_norm`, times `expert_weights_scale` (absent: 1).
- the softmax scale (nope + rope)^-0.5 times yarn's mscale(factor, mscale_all_dim)^2, mscale_all_dim being
  `rope.scaling.yarn_log_multiplier` / 0.1 (for V2's files too, where transformers' V2 leaves it out), and RoPE's
  own magnitude left at 1 (llama.cpp takes mscale = mscale_all_dim).

DeepSeek-V2-Lite (no `attention.q_lora_rank`: one `attn_q` matrix, nope then rope per head) is what llama.cpp's
loader assumes from the layer count alone: it skips the key at 26 or 27 layers (or 48 with a vocabulary of 128256)
and requires it at any other count, so a smaller V2 file is refused there (`key not found in model:
deepseek2.attention.q_lora_rank`); Petit reads the query from the tensors the file has, at any count. Measured on
tests/fixtures/gguf_more/deepseek_v2_lite (26 layers, made from transformers' DeepSeek-V2): llama.cpp's logits are
0.33 of the range from transformers', nearly all of it the mscale^2 softmax scale above (without it, Petit's are 0.10
from transformers' with q8_0's rounding, 0.34 from llama.cpp's); the group score (V3's sum of the best two where
V2's `group_limited_greedy` takes the best one) moves them 0.008. V2's files have no `exp_probs_b`, which llama.cpp
lets a file leave out: the choice is then made on the scores alone (a zero correction bias here). Without
`expert_gating_func`, a file of 47 or 48 layers with a vocabulary of 154880 (GLM-4.7-Lite) runs the sigmoid in
llama.cpp, any other the softmax; so does it here. `attention.temperature_scale` (Mistral-Large's query
temperature) is refused.

llama4 (src/models/llama4.cpp, llama-graph.cpp's build_moe_ffn and attention temperature) has few keys; llama.cpp
fixes the rest, and so does Petit, whatever the original config said:
- unless `attention.sliding_window` is 0 (then every layer is full attention with RoPE, MobileLLM's case), the
  chunked layers are those of `attention.sliding_window_pattern` (absent: 4, three chunked then one full) with a
  chunk of 8192 tokens, whatever the window key says; every 4th layer (i + 1 divisible by 4) has no RoPE, its
  queries scaled by 1 + 0.1 ln(1 + floor((p + 1) / 8192)) at position p (floor scale 8192, scale 0.1, no keys).
  transformers reads `attention_chunk_size`, `no_rope_layers`, `floor_scale` and `attn_scale` from the config, which
  the converter does not write.
- the weightless q / k RMS norm (eps `layer_norm_rms_epsilon`) on the RoPE layers unless the file has 128 experts
  (Maverick), not from `use_qk_norm`.
- the router: the top `expert_used_count` logits, each chosen expert's input scaled by the sigmoid of its logit, plus
  the shared expert of `expert_feed_forward_length` (the dense layers' MLP is `feed_forward_length`), MoE every
  `interleave_moe_layer_step`-th layer; RoPE on adjacent pairs (the converter leaves q / k unpermuted), Llama 3's
  scaling as the file's `rope_freqs` table.
"""
import numpy as np

from petit.loading.gguf_names import LLAMA_LAYER, QWEN_EXPERTS, GGUFArch
from petit.loading.gguf_ssm import Fix
from petit.loading.gguf_variants import _sliding_layers

F32_TENTH = np.float32(0.1)
LLAMA4_CHUNK = 8192           # llama.cpp's llama4: the chunk of its chunked layers, whatever the file says
LLAMA4_TEMPERATURE = (8192.0, 0.1)  # its NoPE layers' query temperature: floor scale, scale (offset 1)
LLAMA4_NOPE_EVERY = 4         # every 4th layer without RoPE
MAVERICK_EXPERTS = 128        # llama.cpp leaves out the q / k norm for this expert count only


def _number(meta, key, k, default=None, kind=int, arch="glm4moe"):
    v = meta.get(key(k), default)
    if v is None:
        raise ValueError(f"metadata {key(k)!r} is missing: llama.cpp's {arch} requires it")
    if isinstance(v, (bool, str)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"metadata {key(k)!r} is {v!r}: it should be a number")
    return kind(v)


def _deepseek2(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, "deepseek2")

    rope = get("rope.dimension_count")
    k_mla, v_mla = get("attention.key_length_mla"), get("attention.value_length_mla")
    if not 0 < rope < k_mla or rope % 2:
        raise ValueError(f"metadata {key('rope.dimension_count')!r} ({rope}) should be even and below "
                         f"{key('attention.key_length_mla')!r} ({k_mla})")
    q_lora = meta.get(key("attention.q_lora_rank"))
    if q_lora is None and not has("blk.0.attn_q.weight"):
        raise ValueError(f"metadata {key('attention.q_lora_rank')!r} is missing, and the file has no "
                         f"'blk.0.attn_q.weight' (DeepSeek-V2-Lite's query)")
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    if np.float32(eps) != np.float32(1e-6):      # llama.cpp takes it for the latent norms too (GLM-4.7-Flash: 1e-5)
        cfg["latent_norm_eps"] = eps
    for k in ("num_key_value_heads", "head_dim", "partial_rotary_factor"):
        cfg.pop(k, None)                        # the latent attention's: one key / value head of rank + rope
    if meta.get(key("attention.temperature_scale")):
        raise ValueError(f"metadata {key('attention.temperature_scale')!r} is set: Petit does not run deepseek2's "
                         f"query temperature (Mistral-Large)")
    glm_lite = cfg["num_hidden_layers"] in (47, 48) and cfg["vocab_size"] == 154880   # llama.cpp's default for it
    gating = get("expert_gating_func", 2 if glm_lite else 1)
    if gating not in (1, 2):
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating}: Petit runs softmax (1) and "
                         f"sigmoid (2)")
    groups = get("expert_group_count", 1)
    cfg.update(kv_lora_rank=get("attention.kv_lora_rank"), q_lora_rank=None if q_lora is None else int(q_lora),
               qk_rope_head_dim=rope, qk_nope_head_dim=k_mla - rope, v_head_dim=v_mla,
               moe_intermediate_size=get("expert_feed_forward_length"), n_shared_experts=get("expert_shared_count"),
               first_k_dense_replace=get("leading_dense_block_count", 0), moe_layer_freq=1,
               scoring_func="sigmoid" if gating == 2 else "softmax",
               norm_topk_prob=bool(meta.get(key("expert_weights_norm"), False)),
               routed_scaling_factor=get("expert_weights_scale", 0.0, float) or 1.0,
               n_group=groups, topk_group=get("expert_group_used_count", 1) if groups > 1 else 1)
    s = cfg.get("rope_scaling")
    if s and s.get("rope_type") == "yarn":
        log_mul = meta.get(key("rope.scaling.yarn_log_multiplier"))
        if log_mul is None:
            raise ValueError(f"metadata {key('rope.scaling.yarn_log_multiplier')!r} is missing: Petit runs "
                             f"deepseek2's YaRN with it only")
        m = float(np.float32(log_mul) / F32_TENTH)       # llama.cpp undoes the converter's 0.1 in float32
        s.update(mscale=m, mscale_all_dim=m)


def _q_and_kv(tensors, cfg) -> dict:
    """Each layer's q_nope / q_pe (every head's rows of attn_q_b or attn_q, nope then rope) and kv_c / kv_pe (the
    latent rows of attn_kv_a_mqa, then the rope rows), as row ranges of the stored tensors."""
    H, dn, dr, r = (cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"],
                    cfg["kv_lora_rank"])
    out = {}
    for i in range(cfg["num_hidden_layers"]):
        a = f"model.layers.{i}.self_attn."
        q = f"blk.{i}.attn_q_b.weight" if cfg.get("q_lora_rank") else f"blk.{i}.attn_q.weight"
        if q not in tensors:
            continue                            # the load names the missing tensor
        w = dn + dr
        out[a + "q_nope.weight"] = [(q, (h * w, h * w + dn)) for h in range(H)]
        out[a + "q_pe.weight"] = [(q, (h * w + dn, (h + 1) * w)) for h in range(H)]
        kv = f"blk.{i}.attn_kv_a_mqa.weight"
        if kv in tensors:
            out[a + "kv_c.weight"] = [(kv, (0, r))]
            out[a + "kv_pe.weight"] = [(kv, (r, r + dr))]
    return out


def _zero_selection_bias(meta, cfg, has) -> dict:
    """A zero `exp_probs_b` for each mixture-of-experts layer whose file has none (DeepSeek-V2's: llama.cpp's
    deepseek2 makes it optional and chooses on the scores alone), as the family's e_score_correction_bias."""
    first, n = cfg["first_k_dense_replace"], cfg["n_routed_experts"]
    return {f"model.layers.{i}.mlp.gate.e_score_correction_bias": np.zeros(n, np.float32)
            for i in range(first, cfg["num_hidden_layers"]) if not has(f"blk.{i}.exp_probs_b.bias")}


# the families these files come from that load as another (DeepSeek-V2's llama.cpp files run as deepseek_v3)
ALSO_READ = {"deepseek_v2"}


def _llama4(meta, key, cfg, has):
    n = cfg["num_hidden_layers"]
    ff_exp, step = meta.get(key("expert_feed_forward_length")), meta.get(key("interleave_moe_layer_step"))
    for k, v in (("expert_feed_forward_length", ff_exp), ("interleave_moe_layer_step", step)):
        if v is None or isinstance(v, (bool, str)) or not isinstance(v, (int, np.integer)) or int(v) <= 0:
            raise ValueError(f"metadata {key(k)!r} is {'missing' if v is None else repr(v)}: Petit's llama4 needs a "
                             f"positive number")
    base, base_swa = cfg["rope_theta"], meta.get(key("rope.freq_base_swa"))
    if base_swa is not None and float(base_swa) != base:
        raise ValueError(f"metadata {key('rope.freq_base_swa')!r} differs from {key('rope.freq_base')!r}: the "
                         f"llama4_text family has one RoPE base")
    cfg.update(intermediate_size_mlp=cfg["intermediate_size"], intermediate_size=int(ff_exp),
               interleave_moe_layer_step=int(step), use_qk_norm=cfg["num_local_experts"] != MAVERICK_EXPERTS,
               attention_bias=has("blk.0.attn_q.bias"))
    window = meta.get(key("attention.sliding_window"))
    if window is not None and int(window) == 0:        # llama.cpp: no chunks, RoPE everywhere, no temperature
        cfg.update(attention_chunk_size=None, no_rope_layers=[1] * n, layer_types=["full_attention"] * n,
                   attn_temperature_tuning=False)
        return
    _sliding_layers(meta, key, cfg, 4)
    cfg["layer_types"] = ["chunked_attention" if t == "sliding_attention" else t for t in cfg["layer_types"]]
    floor, scale = LLAMA4_TEMPERATURE
    cfg.update(attention_chunk_size=LLAMA4_CHUNK, attn_temperature_tuning=True, floor_scale=floor, attn_scale=scale,
               no_rope_layers=[int((i + 1) % LLAMA4_NOPE_EVERY != 0) for i in range(n)])


def _glm4moe(meta, key, cfg, has):
    """llama.cpp's glm4moe (src/models/glm4-moe.cpp, llama-graph.cpp's build_moe_ffn), read as the glm4_moe family:
    the converter writes every routing key, so the file routes as transformers does (sigmoid scores, the choice on
    score + `exp_probs_b` within the `expert_group_used_count` best of `expert_group_count` groups by the sum of each
    group's best two, renormalised with `expert_weights_norm`, times `expert_weights_scale`), and llama.cpp's
    defaults where a key is absent: sigmoid, no groups, no renormalisation, a scale of 1. RoPE rotates halves (NEOX)
    on the first `rope.dimension_count` of each head (absent: all of it); the q / k norms and the q / k / v biases
    are there when the file has their tensors. The multi-token-prediction layers the converter appends
    (`nextn_predict_layers`, counted in `block_count`) are not run by llama.cpp's decoder, nor by Petit: the file's
    last layers are skipped. Refused: the softmax gating (`expert_gating_func` 1, which the glm4_moe family does
    not run) and the multimodal RoPE sections (`rope.dimension_sections`, GLM-4.5V)."""
    gating = _number(meta, key, "expert_gating_func", 2)
    if gating != 2:
        raise ValueError(f"metadata {key('expert_gating_func')!r} is {gating}: Petit's glm4_moe family runs the "
                         f"sigmoid (2) only")
    sections = meta.get(key("rope.dimension_sections"))
    if sections is not None and np.any(np.asarray(sections) != 0):
        raise ValueError(f"metadata {key('rope.dimension_sections')!r} is set: Petit does not run GLM-4.5V's "
                         f"multimodal RoPE")
    nextn = _number(meta, key, "nextn_predict_layers", 0)
    if not 0 <= nextn < cfg["num_hidden_layers"]:
        raise ValueError(f"metadata {key('nextn_predict_layers')!r} ({nextn}) should be below "
                         f"{key('block_count')!r} ({cfg['num_hidden_layers']})")
    groups = _number(meta, key, "expert_group_count", 0) or 1
    rot = _number(meta, key, "rope.dimension_count", cfg["head_dim"])
    cfg.update(num_hidden_layers=cfg["num_hidden_layers"] - nextn,
               partial_rotary_factor=rot / cfg["head_dim"],
               attention_bias=has("blk.0.attn_q.bias"), use_qk_norm=has("blk.0.attn_q_norm.weight"),
               moe_intermediate_size=_number(meta, key, "expert_feed_forward_length"),
               n_shared_experts=_number(meta, key, "expert_shared_count"),
               first_k_dense_replace=_number(meta, key, "leading_dense_block_count", 0),
               norm_topk_prob=bool(meta.get(key("expert_weights_norm"), False)),
               routed_scaling_factor=_number(meta, key, "expert_weights_scale", 0.0, float) or 1.0,
               n_group=groups, topk_group=_number(meta, key, "expert_group_used_count") if groups > 1 else 1)


def _hunyuan_moe(meta, key, cfg, has):
    """llama.cpp's hunyuan-moe (src/models/hunyuan-moe.cpp), read as the hunyuan_v1_moe family. llama.cpp fixes the
    router: the softmax of the logits, the top `expert_used_count`, always renormalised, no scale; every layer's
    experts are `feed_forward_length` wide (llama.cpp sizes them by it, not by `expert_feed_forward_length`) plus one
    shared MLP of `expert_shared_feed_forward_length` (absent: `feed_forward_length`), which the family has of the
    experts' width. RoPE on halves with `rope.freq_base`, the converter's base x alpha^(d / (d - 2)) already (the
    family's NTK alpha), and the per-head q / k norms after it. llama.cpp loads q / k / v biases when the file has
    them and never an `attn_output.bias`: a file with q / k / v biases runs with a zero one here, and a file with
    one is refused (llama.cpp refuses it: wrong number of tensors). transformers' checkpoints that llama.cpp
    refuses: ../../tests/fixtures/gguf_more/README.md."""
    if has("blk.0.attn_output.bias"):
        raise ValueError("tensor 'blk.0.attn_output.bias' is not loaded by llama.cpp's hunyuan-moe (it refuses such a "
                         "file), and Petit does not run it either")
    shared = _number(meta, key, "expert_shared_feed_forward_length", cfg["intermediate_size"], arch="hunyuan-moe")
    if shared != cfg["intermediate_size"]:
        raise ValueError(f"metadata {key('expert_shared_feed_forward_length')!r} ({shared}) differs from "
                         f"{key('feed_forward_length')!r} ({cfg['intermediate_size']}): the hunyuan_v1_moe family's "
                         f"shared MLP is as wide as its experts")
    cfg.update(moe_topk=cfg.pop("num_experts_per_tok"), attention_bias=has("blk.0.attn_q.bias"))


def _zero_o_bias(meta, cfg, has) -> dict:
    """A zero o_proj bias per layer when the file has q / k / v biases (llama.cpp's hunyuan-moe loads those and
    never an attn_output.bias; the family's attention_bias gives all four)."""
    if not cfg.get("attention_bias"):
        return {}
    return {f"model.layers.{i}.self_attn.o_proj.bias": np.zeros(cfg["hidden_size"], np.float32)
            for i in range(cfg["num_hidden_layers"])}


LLAMA_CPP_NORM_MIN = 6.103515625e-5     # build_moe_ffn clamps the chosen weights' sum to at least this (F16's least)


def _ernie_moe(meta, key, cfg, has):
    """llama.cpp's ernie4_5-moe (src/models/ernie4-5-moe.cpp, ernie4-5.cpp's loader), read as the ernie4_5_moe
    family. llama.cpp fixes the router: the softmax of the logits, the choice on those plus `exp_probs_b` (optional:
    a zero bias without it), the chosen probabilities renormalised by their sum clamped to at least 2^-14 (the
    family's `moe_norm_min`, 1e-12 in transformers), no scale. Experts from `leading_dense_block_count` on, of
    `expert_feed_forward_length`, and one shared MLP of `expert_shared_feed_forward_length` (the converter writes
    intermediate_size // num_key_value_heads there, ERNIE-4.5-21B's 2 x 1536: read as that many experts' width).
    RoPE on adjacent pairs (ERNIE's own interleaving, unpermuted). Refused: an `interleave_moe_layer_step` other
    than 1 (llama.cpp's loader then gives expert tensors to layers its graph runs dense), a shared width that is no
    multiple of the experts', and biases (llama.cpp loads the attention's but not the MLP's, which the family's
    `use_bias` has together)."""
    step = _number(meta, key, "interleave_moe_layer_step", arch="ernie4_5-moe")
    if step != 1:
        raise ValueError(f"metadata {key('interleave_moe_layer_step')!r} is {step}: Petit runs llama.cpp's "
                         f"ernie4_5-moe with experts in every layer from {key('leading_dense_block_count')!r} on (1)")
    if has("blk.0.attn_q.bias") or has("blk.0.attn_output.bias"):
        raise ValueError("the file has attention biases: Petit's ernie4_5_moe family runs them with the MLP biases "
                         "of use_bias, which llama.cpp's ernie4_5-moe does not load")
    inter = _number(meta, key, "expert_feed_forward_length", arch="ernie4_5-moe")
    shared = _number(meta, key, "expert_shared_feed_forward_length", 0, arch="ernie4_5-moe")
    if shared % inter:
        raise ValueError(f"metadata {key('expert_shared_feed_forward_length')!r} ({shared}) is not a multiple of "
                         f"{key('expert_feed_forward_length')!r} ({inter}), which the ernie4_5_moe family requires")
    cfg.update(moe_k=cfg.pop("num_experts_per_tok"), moe_intermediate_size=inter,
               moe_num_shared_experts=shared // inter,
               moe_layer_start_index=_number(meta, key, "leading_dense_block_count", 0, arch="ernie4_5-moe"),
               moe_layer_end_index=-1, moe_layer_interval=1, moe_norm_min=LLAMA_CPP_NORM_MIN, use_bias=False)
    cfg.pop("head_dim", None)


def _ernie_zero_bias(meta, cfg, has) -> dict:
    """A zero selection bias for each expert layer whose file has no `exp_probs_b` (optional in llama.cpp)."""
    first, n = cfg["moe_layer_start_index"], cfg["moe_num_experts"]
    return {f"model.layers.{i}.mlp.moe_statics.e_score_correction_bias": np.zeros((1, n), np.float32)
            for i in range(first, cfg["num_hidden_layers"]) if not has(f"blk.{i}.exp_probs_b.bias")}


def _dbrx(meta, key, cfg, has):
    """llama.cpp's dbrx (src/models/dbrx.cpp), read as the dbrx family: LayerNorms without bias of
    `attention.layer_norm_epsilon` (the family's 1e-5: another is refused), q / k / v rows of the fused `attn_qkv`
    clamped to +-`attention.clamp_kqv` (0: none), RoPE on halves over the whole head; experts in every layer, the
    softmax of the router's logits, the top `expert_used_count`, always renormalised (the family's
    `moe_normalize_expert_weights` 1), no scale. Refused besides: RoPE scaling, and a head of other than
    `embedding_length / head_count` or partial RoPE (the family has neither; llama.cpp asserts the latter)."""
    eps = _number(meta, key, "attention.layer_norm_epsilon", kind=float, arch="dbrx")
    if np.float32(eps) != np.float32(1e-5):
        raise ValueError(f"metadata {key('attention.layer_norm_epsilon')!r} is {eps:g}: the dbrx family's "
                         f"LayerNorms have 1e-5")
    if cfg.get("rope_scaling"):
        raise ValueError(f"metadata {key('rope.scaling.type')!r} is set: the dbrx family runs unscaled RoPE")
    hd = cfg.pop("head_dim")
    rot = _number(meta, key, "rope.dimension_count", hd, arch="dbrx")
    if hd * cfg["num_attention_heads"] != cfg["hidden_size"] or rot != hd:
        raise ValueError(f"metadata {key('attention.key_length')!r} ({hd}) and {key('rope.dimension_count')!r} "
                         f"({rot}) should both be {key('embedding_length')!r} / {key('attention.head_count')!r} "
                         f"({cfg['hidden_size'] // cfg['num_attention_heads']}), as the dbrx family has them")
    clip = _number(meta, key, "attention.clamp_kqv", kind=float, arch="dbrx")
    cfg.pop("partial_rotary_factor", None)
    cfg.update(d_model=cfg.pop("hidden_size"), n_layers=cfg.pop("num_hidden_layers"),
               n_heads=cfg.pop("num_attention_heads"), max_seq_len=cfg.pop("max_position_embeddings"),
               attn_config={"kv_n_heads": cfg["num_key_value_heads"], "clip_qkv": clip or None,
                            "rope_theta": cfg.pop("rope_theta")},
               ffn_config={"ffn_hidden_size": cfg.pop("intermediate_size"), "moe_num_experts": cfg.pop("num_experts"),
                           "moe_top_k": cfg.pop("num_experts_per_tok"), "moe_normalize_expert_weights": 1.0})


FF = "feed_forward."
LLAMA4_LAYER = dict(LLAMA_LAYER, ffn_gate=FF + "gate_proj", ffn_up=FF + "up_proj", ffn_down=FF + "down_proj",
                    ffn_gate_inp=FF + "router", ffn_gate_shexp=FF + "shared_expert.gate_proj",
                    ffn_up_shexp=FF + "shared_expert.up_proj", ffn_down_shexp=FF + "shared_expert.down_proj")
LLAMA4_EXPERTS = {k: v.replace("mlp.", FF) for k, v in QWEN_EXPERTS.items()}

# DeepSeek-V3's router and shared experts, which GLM-4.5 shares
DEEPSEEK_LAYER = dict(LLAMA_LAYER, ffn_gate_inp="mlp.gate", ffn_gate_shexp="mlp.shared_experts.gate_proj",
                      ffn_up_shexp="mlp.shared_experts.up_proj", ffn_down_shexp="mlp.shared_experts.down_proj")

MOE_ARCHS = {
    "deepseek2": GGUFArch("deepseek_v3", DEEPSEEK_LAYER | {"attn_q_a": "self_attn.q_a_proj",
                                                           "attn_q_a_norm": "self_attn.q_a_layernorm",
                                                           "attn_kv_a_norm": "self_attn.kv_a_layernorm"},
                          whole_names={"exp_probs_b.bias": "mlp.gate.e_score_correction_bias"},
                          experts=dict(QWEN_EXPERTS, attn_k_b="self_attn.k_absorb.{}",
                                       attn_v_b="self_attn.v_absorb.{}"),
                          expert_key="n_routed_experts", joins=_q_and_kv, extra=_deepseek2, own_head_sizes=True,
                          meta_tensors=_zero_selection_bias),
    "glm4moe": GGUFArch("glm4_moe", DEEPSEEK_LAYER | {"post_attention_norm": "post_attention_layernorm"},
                        whole_names={"exp_probs_b.bias": "mlp.gate.e_score_correction_bias"}, experts=QWEN_EXPERTS,
                        expert_key="n_routed_experts", extra=_glm4moe),
    "hunyuan-moe": GGUFArch("hunyuan_v1_moe", dict(LLAMA_LAYER, attn_q_norm="self_attn.query_layernorm",
                                                   attn_k_norm="self_attn.key_layernorm", ffn_gate_inp="mlp.gate.wg",
                                                   ffn_gate_shexp="mlp.shared_mlp.gate_proj",
                                                   ffn_up_shexp="mlp.shared_mlp.up_proj",
                                                   ffn_down_shexp="mlp.shared_mlp.down_proj"),
                            experts=QWEN_EXPERTS, expert_key="num_experts", extra=_hunyuan_moe,
                            meta_tensors=_zero_o_bias),
    "ernie4_5-moe": GGUFArch("ernie4_5_moe", dict(LLAMA_LAYER, ffn_gate_inp="mlp.gate",
                                                  ffn_gate_shexp="mlp.shared_experts.gate_proj",
                                                  ffn_up_shexp="mlp.shared_experts.up_proj",
                                                  ffn_down_shexp="mlp.shared_experts.down_proj"),
                             whole_names={"exp_probs_b.bias": "mlp.moe_statics.e_score_correction_bias"},
                             fixes={"exp_probs_b.bias": Fix(shape=lambda s: (1,) + tuple(s))},
                             experts=QWEN_EXPERTS, expert_key="moe_num_experts", extra=_ernie_moe,
                             meta_tensors=_ernie_zero_bias),
    # DBRX's norm_1 / norm_2 around attention, its Wqkv split by rows, the experts of transformers' per-expert names
    "dbrx": GGUFArch("dbrx", {"attn_norm": "norm_attn_norm.norm_1", "attn_output": "norm_attn_norm.attn.out_proj",
                              "attn_output_norm": "norm_attn_norm.norm_2", "ffn_gate_inp": "ffn.router.layer"},
                     prefix="transformer.blocks.{}.",
                     global_names={"token_embd": "transformer.wte", "output_norm": "transformer.norm_f",
                                   "output": "lm_head"},
                     splits={"attn_qkv": (("norm_attn_norm.attn.q_proj", "q"), ("norm_attn_norm.attn.k_proj", "kv"),
                                          ("norm_attn_norm.attn.v_proj", "kv"))},
                     experts={"ffn_gate_exps": "ffn.experts.{}.gate_proj", "ffn_up_exps": "ffn.experts.{}.up_proj",
                              "ffn_down_exps": "ffn.experts.{}.down_proj"}, extra=_dbrx),
    "llama4": GGUFArch("llama4_text", LLAMA4_LAYER, experts=LLAMA4_EXPERTS, expert_key="num_local_experts",
                       extra=_llama4),
}
