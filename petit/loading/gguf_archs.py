"""What a GGUF file's `general.architecture` means to Petit: which family runs it, the Hugging Face config its
metadata keys amount to (with what llama.cpp assumes where the file says nothing), and which Hugging Face tensor name
each of llama.cpp's tensor names stands for (llama.cpp's src/llama-arch.cpp and its converter, convert_hf_to_gguf.py).

llama.cpp's converter permutes the q / k rows of Llama-like models so that RoPE rotates adjacent pairs (its "NORM"
RoPE) instead of halves (Hugging Face's rotate-half), and stores Gemma's norm weights as 1 + w. Petit runs such files
as they are: RoPE on adjacent pairs (`rope_interleaved`), the norms without Gemma's + 1.
"""
import numpy as np

from petit.loading.gguf_names import (GPT2_LAYER, GPTNEOX_LAYER, GRANITE_EXPERTS, GRANITE_MOE_LAYER, LLAMA_LAYER,
                                      MIXTRAL_EXPERTS, MIXTRAL_LAYER, PHI2_LAYER, QKV, QWEN_EXPERTS,
                                      QWEN_MOE_LAYER, SANDWICH_LAYER, STABLELM_LAYER, STARCODER2_LAYER, GGUFArch,
                                      _biases, _granite)
from petit.loading.gguf_dense5 import DENSE5_ARCHS
from petit.loading.gguf_hybrid5 import HYBRID5_ARCHS, is_bamba     # issue 30: the hybrid group
from petit.loading.gguf_kimi5 import KIMI5_ARCHS        # issue 30: the kimi_gguf follow-up (kimi-linear)
from petit.loading.gguf_mimo5 import MIMO5_ARCHS        # issue 30: the mimo group (mimo2)
from petit.loading.gguf_wrap5 import WRAP5_ARCHS      # issue 30: the wrap group
from petit.loading.gguf_moe_a5 import MOE_A5_ARCHS
from petit.loading.gguf_mla5 import MLA5_ARCHS          # issue 30: the mla group
from petit.loading.gguf_recur5 import RECUR5_ARCHS       # issue 30: the recur group (rwkv6)
from petit.loading.gguf_gemma5 import GEMMA5_ARCHS          # issue 30: the gemma group
from petit.loading.gguf_moe import MOE_ARCHS
from petit.loading.gguf_moe_b5 import MOE_B5_ARCHS         # issue 30: the moe_b group
from petit.loading.gguf_phimoe import PHIMOE_ARCHS         # issue 30: the ggufx group (phimoe)
from petit.loading.gguf_ggufx5 import GGUFX5_ARCHS         # issue 30: the ggufx group (rwkv6qwen2, arwkv7)
from petit.loading.gguf_fam36c5 import FAM36C5_ARCHS       # issue 36: the fam36c group (bailingmoe2)
from petit.loading.gguf_fam36o5 import FAM36O5_ARCHS       # issue 36: the fam36o group (hrm_text)
from petit.loading.gguf_fam36q5 import fam36q_archs        # issue 36: the fam36q group (hy_v3, codeshell)
from petit.loading.gguf_fam36r5 import fam36r_archs        # issue 36: the fam36r group (qwen*vl*, xverse, orion)
from petit.loading.gguf_gg36s5 import gg36s_archs          # issue 36: the gg36s group (laguna, minimax-01)
from petit.loading.gguf_gg36t5 import GG36T5_ARCHS         # issue 36: the gg36t group (minimax-m3)
from petit.loading.gguf_dsv4g5 import DSV4G5_ARCHS         # issue 30: the dsv4g group (deepseek4)
from petit.loading.gguf_gemb35 import GEMB35_ARCHS         # issue 35: the gemb35 group (bert, nomic-bert)
from petit.loading.gguf_qwenvl5 import qwenvl_archs       # issue 36: the qwenvl group (glm4 / glm4moe with M-RoPE)
from petit.loading.gguf_newdec5 import NEWDEC5_ARCHS       # issue 36: the newdec group (mistral4)
from petit.loading.gguf_vlnew5 import VLNEW5_ARCHS         # issue 36: the vlnew group (hunyuan_vl)
from petit.loading.gguf_ssm import SSM_ARCHS
from petit.loading.gguf_variants import VARIANT_ARCHS


def _gemma2(meta, key, cfg, has):
    cfg["attn_logit_softcapping"] = meta.get(key("attn_logit_softcapping")) or None
    cfg["final_logit_softcapping"] = meta.get(key("final_logit_softcapping")) or None
    cfg["sliding_window"] = meta.get(key("attention.sliding_window"), 4096)
    cfg["query_pre_attn_scalar"] = _gemma_scalar(cfg, 46)


def _gemma3(meta, key, cfg, has):
    window = meta.get(key("attention.sliding_window"))
    cfg["final_logit_softcapping"] = meta.get(key("final_logit_softcapping")) or None
    cfg["rope_local_base_freq"] = float(meta.get(key("rope.freq_base_swa"), 10000.0))
    cfg["query_pre_attn_scalar"] = _gemma_scalar(cfg, 62)
    if window:
        cfg["sliding_window"] = int(window)
        cfg["sliding_window_pattern"] = 6          # llama.cpp's fixed pattern: every 6th layer is full
    else:
        cfg["layer_types"] = ["full_attention"] * cfg["num_hidden_layers"]


def _gemma_scalar(cfg, layers_27b: int):
    """llama.cpp scales the queries by 1/sqrt(head_dim), or 1/sqrt(hidden / heads) for the 27B models (which it
    recognises by their layer count): the file does not record query_pre_attn_scalar."""
    if cfg["num_hidden_layers"] == layers_27b:
        return cfg["hidden_size"] / cfg["num_attention_heads"]
    return cfg["head_dim"]


def _phi3(meta, key, cfg, has):
    window = meta.get(key("attention.sliding_window"))
    cfg["sliding_window"] = int(window) if window else None
    cfg["original_max_position_embeddings"] = meta.get(key("rope.scaling.original_context_length"),
                                                       cfg["max_position_embeddings"])


def _smollm3(meta, key, cfg, has):
    _biases(meta, key, cfg, has)
    cfg["no_rope_layer_interval"] = 4               # llama.cpp's fixed step: every 4th layer has no RoPE


def _layernorm(cfg, meta, key, name):
    cfg.pop("rms_norm_eps", None)
    cfg[name] = float(meta.get(key("attention.layer_norm_epsilon"), 1e-5))


def _phi2(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "layer_norm_eps")
    cfg["hidden_act"] = "gelu_new"                 # llama.cpp computes GELU in its tanh form
    cfg["qk_layernorm"] = False
    cfg.pop("head_dim", None)


def _stablelm(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "layer_norm_eps")
    cfg["use_qkv_bias"] = has("blk.0.attn_q.bias")
    cfg["qk_layernorm"] = has("blk.0.attn_q_norm.weight")
    cfg["use_parallel_residual"] = not has("blk.0.ffn_norm.weight")
    cfg.pop("head_dim", None)


def _command_r(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "layer_norm_eps")
    cfg["logit_scale"] = float(meta.get(key("logit_scale"), 1.0))
    cfg["use_qk_norm"] = has("blk.0.attn_q_norm.weight")
    cfg["attention_bias"] = has("blk.0.attn_q.bias")
    cfg["tie_word_embeddings"] = True              # llama.cpp's command-r takes the head from token_embd


def _cohere2(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "layer_norm_eps")
    cfg["logit_scale"] = float(meta.get(key("logit_scale"), 1.0))
    cfg["sliding_window"] = int(meta[key("attention.sliding_window")])
    cfg["sliding_window_pattern"] = 4              # llama.cpp's fixed pattern: every 4th layer is full


def _starcoder2(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "norm_epsilon")
    cfg["use_bias"] = has("blk.0.attn_q.bias")
    cfg["sliding_window"] = None                   # llama.cpp runs StarCoder2 without one
    cfg["hidden_act"] = "gelu_pytorch_tanh"


def _gptneox(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "layer_norm_eps")
    cfg["use_parallel_residual"] = bool(meta.get(key("use_parallel_residual"), True))
    cfg["partial_rotary_factor"] = cfg.pop("partial_rotary_factor", 1.0)
    cfg["hidden_act"] = "gelu_new"                 # llama.cpp computes GELU in its tanh form
    cfg["attention_bias"] = has("blk.0.attn_qkv.bias")
    for k in ("num_key_value_heads", "head_dim"):
        cfg.pop(k, None)


def _gpt2(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "layer_norm_epsilon")
    for hf, gpt2 in (("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"), ("num_attention_heads", "n_head"),
                     ("max_position_embeddings", "n_positions"), ("intermediate_size", "n_inner")):
        cfg[gpt2] = cfg.pop(hf)
    for k in ("num_key_value_heads", "head_dim", "rope_theta"):
        cfg.pop(k, None)


def _qwen3moe(meta, key, cfg, has):
    cfg["attention_bias"] = has("blk.0.attn_q.bias")
    cfg["moe_intermediate_size"] = int(meta.get(key("expert_feed_forward_length"))
                                       or cfg["intermediate_size"] // cfg["num_experts_per_tok"])
    cfg["norm_topk_prob"] = True                   # llama.cpp's qwen3moe always renormalises the chosen weights


def _qwen2moe(meta, key, cfg, has):
    cfg["qkv_bias"] = has("blk.0.attn_q.bias")
    cfg["moe_intermediate_size"] = int(meta.get(key("expert_feed_forward_length"))
                                       or cfg["intermediate_size"] // cfg["num_experts_per_tok"])
    cfg["shared_expert_intermediate_size"] = int(meta.get(key("expert_shared_feed_forward_length"))
                                                 or cfg["intermediate_size"])
    cfg["norm_topk_prob"] = False                  # llama.cpp's qwen2moe never renormalises them


def _olmoe(meta, key, cfg, has):
    cfg["norm_topk_prob"] = False                  # nor does its olmoe


def _granitemoe(meta, key, cfg, has):
    _granite(meta, key, cfg, has)
    if has("blk.0.ffn_gate_shexp.weight"):         # llama.cpp's granitemoe with a shared MLP: GraniteMoeShared
        cfg["model_type"] = "granitemoeshared"
        cfg["shared_intermediate_size"] = int(meta.get(key("expert_shared_feed_forward_length"), 0))


def _rename(cfg, **names):
    for hf, new in names.items():
        cfg[new] = cfg.pop(hf)


def _falcon(meta, key, cfg, has):
    """llama.cpp's falcon: parallel attention and MLP always; a second norm (attn_norm_2) means the new decoder
    architecture (Falcon-40B), else one key / value head is Falcon-7B's multi-query layout; the converter stores the
    fused q|k|v as contiguous q, k, v rows (its "jploski" layout) whichever it was."""
    _layernorm(cfg, meta, key, "layer_norm_epsilon")
    new = has("blk.0.attn_norm_2.weight")
    kv = cfg.pop("num_key_value_heads")
    cfg.update(new_decoder_architecture=new, num_kv_heads=kv, multi_query=kv == 1, parallel_attn=True, alibi=False,
               bias=has("blk.0.attn_qkv.bias"), ffn_hidden_size=cfg.pop("intermediate_size"))
    cfg.pop("head_dim", None)


def _bloom(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "layer_norm_epsilon")
    _rename(cfg, num_hidden_layers="n_layer", num_attention_heads="n_head")
    for k in ("num_key_value_heads", "head_dim", "rope_theta", "intermediate_size", "max_position_embeddings"):
        cfg.pop(k, None)


def _mpt(meta, key, cfg, has):
    """The file keeps clip_qkv (clamp_kqv) and the ALiBi bias max but not MPT's softmax_scale: llama.cpp scales the
    scores by head_dim^-1/2, and so does Petit for such a file."""
    cfg.pop("rms_norm_eps", None)
    cfg["layer_norm_epsilon"] = float(meta.get(key("attention.layer_norm_epsilon"), 1e-5))
    _rename(cfg, hidden_size="d_model", num_hidden_layers="n_layers", num_attention_heads="n_heads",
            max_position_embeddings="max_seq_len")
    cfg["attn_config"] = {"alibi": True, "alibi_bias_max": float(meta.get(key("attention.max_alibi_bias"), 8.0)),
                          "clip_qkv": meta.get(key("attention.clamp_kqv")) or None}
    cfg["expansion_ratio"] = cfg.pop("intermediate_size") // cfg["d_model"]
    for k in ("num_key_value_heads", "head_dim", "rope_theta"):
        cfg.pop(k, None)


def _seed_oss(meta, key, cfg, has):
    cfg.update(attention_bias=has("blk.0.attn_q.bias"), attention_out_bias=has("blk.0.attn_output.bias"),
               mlp_bias=has("blk.0.ffn_up.bias"))


def _starcoder(meta, key, cfg, has):
    kv = cfg["num_key_value_heads"]
    _gpt2(meta, key, cfg, has)
    cfg.update(model_type="gpt_bigcode", multi_query=kv == 1, num_key_value_heads=kv)


def _nemotron(meta, key, cfg, has):
    _layernorm(cfg, meta, key, "norm_eps")
    cfg.update(attention_bias=has("blk.0.attn_q.bias"), mlp_bias=has("blk.0.ffn_up.bias"))


def _mixtral(meta, key, cfg, has):
    cfg["sliding_window"] = None                   # llama.cpp's llama architecture has no sliding window


ARCHS = {
    "llama": GGUFArch("llama", LLAMA_LAYER, rope_pairs=True, extra=_biases),
    "qwen2": GGUFArch("qwen2", LLAMA_LAYER),
    "qwen3": GGUFArch("qwen3", LLAMA_LAYER, extra=lambda meta, key, cfg, has: cfg.update(
        attention_bias=has("blk.0.attn_q.bias"))),
    "gemma": GGUFArch("gemma", LLAMA_LAYER, norm_shift=1.0),
    "gemma2": GGUFArch("gemma2", SANDWICH_LAYER, norm_shift=1.0, extra=_gemma2),
    "gemma3": GGUFArch("gemma3_text", SANDWICH_LAYER, norm_shift=1.0, extra=_gemma3),
    "phi3": GGUFArch("phi3", LLAMA_LAYER, splits={"attn_qkv": QKV, "ffn_up": (("mlp.gate_proj", "ff"),
                                                                              ("mlp.up_proj", "ff"))}, extra=_phi3),
    "granite": GGUFArch("granite", LLAMA_LAYER, rope_pairs=True, extra=_granite),
    "smollm3": GGUFArch("smollm3", LLAMA_LAYER, rope_pairs=True, extra=_smollm3),
    "cohere2": GGUFArch("cohere2", LLAMA_LAYER, extra=_cohere2),
    "command-r": GGUFArch("cohere", LLAMA_LAYER, extra=_command_r),
    "phi2": GGUFArch("phi", PHI2_LAYER, global_names={"token_embd": "model.embed_tokens",
                                                      "output_norm": "model.final_layernorm", "output": "lm_head"},
                     splits={"attn_qkv": QKV}, extra=_phi2),
    "stablelm": GGUFArch("stablelm", STABLELM_LAYER, extra=_stablelm),
    "starcoder2": GGUFArch("starcoder2", STARCODER2_LAYER, extra=_starcoder2),
    "gptneox": GGUFArch("gpt_neox", GPTNEOX_LAYER, prefix="gpt_neox.layers.{}.",
                        global_names={"token_embd": "gpt_neox.embed_in", "output_norm": "gpt_neox.final_layer_norm",
                                      "output": "embed_out"},
                        splits={"attn_qkv": (("attention.q_proj", "q"), ("attention.k_proj", "q"),
                                             ("attention.v_proj", "q"))}, extra=_gptneox),
    "qwen3moe": GGUFArch("qwen3_moe", QWEN_MOE_LAYER, experts=QWEN_EXPERTS, extra=_qwen3moe),
    "qwen2moe": GGUFArch("qwen2_moe", QWEN_MOE_LAYER, experts=QWEN_EXPERTS, extra=_qwen2moe),
    "olmoe": GGUFArch("olmoe", QWEN_MOE_LAYER, experts=QWEN_EXPERTS, extra=_olmoe),
    "granitemoe": GGUFArch("granitemoe", GRANITE_MOE_LAYER, rope_pairs=True, experts=GRANITE_EXPERTS,
                           expert_key="num_local_experts", extra=_granitemoe),
    # Seed-OSS's pre-MLP norm is llama.cpp's post_attention_norm; Hunyuan's q / k norms come after RoPE (the
    # family's own order) and its NTK alpha is baked into rope.freq_base; Arcee's MLP has no gate
    "seed_oss": GGUFArch("seed_oss", {**{k: v for k, v in LLAMA_LAYER.items() if k != "ffn_norm"},
                                      "post_attention_norm": "post_attention_layernorm"}, extra=_seed_oss),
    "hunyuan-dense": GGUFArch("hunyuan_v1_dense", dict(LLAMA_LAYER, attn_q_norm="self_attn.query_layernorm",
                                                       attn_k_norm="self_attn.key_layernorm")),
    "arcee": GGUFArch("arcee", LLAMA_LAYER, rope_pairs=True, extra=lambda meta, key, cfg, has: cfg.update(
        attention_bias=has("blk.0.attn_q.bias"), mlp_bias=has("blk.0.ffn_up.bias"))),
    # GLM-4's gate|up stays fused in ffn_up, split by rows; its partial RoPE is on adjacent pairs, unpermuted
    "glm4": GGUFArch("glm4", dict(LLAMA_LAYER, post_attention_norm="post_self_attn_layernorm",
                                  post_ffw_norm="post_mlp_layernorm"),
                     splits={"ffn_up": (("mlp.gate_proj", "ff"), ("mlp.up_proj", "ff"))},
                     extra=lambda meta, key, cfg, has: cfg.update(attention_bias=has("blk.0.attn_q.bias"))),
    # Nemotron's LayerNorm1P weights are stored as 1 + w (the family adds the 1); its MLP has no gate
    "nemotron": GGUFArch("nemotron", LLAMA_LAYER, norm_shift=1.0, extra=_nemotron),
    "falcon": GGUFArch("falcon", {"attn_norm": "input_layernorm", "attn_norm_2": "ln_attn",
                                  "attn_output": "self_attention.dense", "ffn_up": "mlp.dense_h_to_4h",
                                  "ffn_down": "mlp.dense_4h_to_h"}, prefix="transformer.h.{}.",
                       global_names={"token_embd": "transformer.word_embeddings", "output_norm": "transformer.ln_f",
                                     "output": "lm_head"},
                       splits={"attn_qkv": (("self_attention.q_proj", "q"), ("self_attention.k_proj", "kv"),
                                            ("self_attention.v_proj", "kv"))}, extra=_falcon),
    "bloom": GGUFArch("bloom", {"attn_norm": "input_layernorm", "attn_output": "self_attention.dense",
                                "ffn_norm": "post_attention_layernorm", "ffn_up": "mlp.dense_h_to_4h",
                                "ffn_down": "mlp.dense_4h_to_h"}, prefix="transformer.h.{}.",
                      global_names={"token_embd": "transformer.word_embeddings",
                                    "token_embd_norm": "transformer.word_embeddings_layernorm",
                                    "output_norm": "transformer.ln_f", "output": "lm_head"},
                      splits={"attn_qkv": (("self_attention.q_proj", "q"), ("self_attention.k_proj", "q"),
                                           ("self_attention.v_proj", "q"))}, extra=_bloom),
    "mpt": GGUFArch("mpt", {"attn_norm": "norm_1", "attn_output": "attn.out_proj", "ffn_norm": "norm_2",
                            "ffn_up": "ffn.up_proj", "ffn_down": "ffn.down_proj"}, prefix="transformer.blocks.{}.",
                    global_names={"token_embd": "transformer.wte", "output_norm": "transformer.norm_f",
                                  "output": "lm_head"},
                    splits={"attn_qkv": (("attn.q_proj", "q"), ("attn.k_proj", "q"), ("attn.v_proj", "q"))},
                    extra=_mpt),
    "gpt2": GGUFArch("gpt2", GPT2_LAYER, prefix="transformer.h.{}.",
                     global_names={"token_embd": "transformer.wte", "position_embd": "transformer.wpe",
                                   "output_norm": "transformer.ln_f", "output": "lm_head"},
                     splits={"attn_qkv": (("attn.q_proj", "q"), ("attn.k_proj", "q"), ("attn.v_proj", "q"))},
                     extra=_gpt2),
    "starcoder": GGUFArch("gpt_bigcode", GPT2_LAYER, prefix="transformer.h.{}.",
                          global_names={"token_embd": "transformer.wte", "position_embd": "transformer.wpe",
                                        "output_norm": "transformer.ln_f", "output": "lm_head"},
                          splits={"attn_qkv": (("attn.q_proj", "q"), ("attn.k_proj", "kv"), ("attn.v_proj", "kv"))},
                          extra=_starcoder),
}


# llama.cpp's llama architecture with experts (expert_count > 0) is Mixtral
MIXTRAL = GGUFArch("mixtral", MIXTRAL_LAYER, rope_pairs=True, experts=MIXTRAL_EXPERTS, expert_key="num_local_experts",
                   extra=_mixtral)


def supported() -> str:
    return ", ".join(sorted(ARCHS))


def unsupported(name: str) -> str:
    """Why a GGUF architecture does not run: what it is, when it is no decoder-only language model."""
    from petit.models.refusals import GGUF_NOT_DECODERS, NOT_YET
    if name in GGUF_NOT_DECODERS:
        return f"architecture {name!r} is {GGUF_NOT_DECODERS[name]}; Petit runs decoder-only language models"
    if "gguf:" + name in NOT_YET:
        return f"architecture {name!r} is not read by Petit yet: {NOT_YET['gguf:' + name]}"
    return f"architecture {name!r} is not supported by Petit's GGUF reader (supported: {supported()})"


def hf_name(name: str, arch: GGUFArch) -> str | None:
    """The Hugging Face name of one of llama.cpp's tensor names (None: not one this architecture maps; a fused
    matrix's parts come from `split_names`)."""
    if (whole := layer_name(name, arch)) is not None:
        return whole
    stem, _, kind = name.rpartition(".")
    if kind not in ("weight", "bias"):
        return None
    if stem in arch.global_names:
        return f"{arch.global_names[stem]}.{kind}"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in arch.layer_names:
        return f"{arch.prefix.format(int(parts[1]))}{arch.layer_names[parts[2]]}.{kind}"
    return None


def _layer_rest(name: str) -> tuple[int, str] | None:
    """(N, the rest) of a layer tensor's name "blk.N.rest", else None."""
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit():
        return int(parts[1]), parts[2]
    return None


def layer_name(name: str, arch: GGUFArch) -> str | None:
    """The Hugging Face name of a layer tensor the architecture maps by its whole name after "blk.N." (names
    without ".weight" such as Mamba's `ssm_a`, or of more than one part such as LFM2's `shortconv.conv.weight`)."""
    at = _layer_rest(name)
    if at is None or at[1] not in arch.whole_names:
        return None
    return arch.prefix.format(at[0]) + arch.whole_names[at[1]]


def tensor_fix(name: str, arch: GGUFArch, more: dict | None = None):
    """The fix (see GGUFArch.fixes; `more`: GGUFArch.cfg_fixes of the file's config) of one of llama.cpp's tensor
    names, or None."""
    at = _layer_rest(name)
    if at is None:
        return None
    return (more or {}).get(at[1]) or arch.fixes.get(at[1])


def expert_names(name: str, arch: GGUFArch, shape: tuple) -> list | None:
    """A stacked expert tensor's matrices (or biases, [experts, n]: gpt-oss): [(HF name, (r0, r1)), ...] over the
    rows of its [experts x rows, columns] view, or None when `name` is not one."""
    stem, _, kind = name.rpartition(".")
    parts = stem.split(".")
    if not (len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in arch.experts
            and (kind, len(shape)) in (("weight", 3), ("bias", 2))):
        return None
    rows, prefix = shape[1] if kind == "weight" else 1, arch.prefix.format(int(parts[1]))
    return [(f"{prefix}{arch.experts[parts[2]].format(e)}.{kind}", (e * rows, (e + 1) * rows)) for e in range(shape[0])]


def split_names(name: str, arch: GGUFArch, cfg: dict, rows: int) -> list | None:
    """A fused matrix's (or bias's) parts: [(HF name, (r0, r1)), ...] over its `rows`, or None when `name` is not
    one of the architecture's fused tensors (or its rows are not the sum of the parts: then it is not fused)."""
    stem, _, kind = name.rpartition(".")
    parts = stem.split(".")
    if not (len(parts) == 3 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in arch.splits):
        return None
    first = lambda *keys, default=0: next((cfg[k] for k in keys if cfg.get(k) is not None), default)  # noqa: E731
    heads = first("num_attention_heads", "n_head", "n_heads")
    hd = cfg.get("head_dim") or first("hidden_size", "n_embd", "d_model") // max(heads, 1)
    sizes = {"q": heads * hd, "kv": first("num_key_value_heads", "num_kv_heads", default=heads) * hd,
             "ff": cfg.get("intermediate_size", cfg.get("n_inner", 0))}
    out, at = [], 0
    for hf, size in arch.splits[parts[2]]:
        out.append((f"{arch.prefix.format(int(parts[1]))}{hf}.{kind}", (at, at + sizes[size])))
        at += sizes[size]
    return out if at == rows else None


def config_from_gguf(meta: dict, where: str, n_vocab: int, tensors) -> tuple[GGUFArch, dict]:
    """The architecture and the Hugging Face config (model_type and field names) a GGUF file's metadata describes.

    Raises:
        ValueError: an architecture Petit does not run (naming the supported ones), a missing or malformed key.
    """
    name = meta.get("general.architecture")
    if not isinstance(name, str):
        raise ValueError(f"{where}: metadata 'general.architecture' is missing")
    if name not in ARCHS:
        raise ValueError(f"{where}: {unsupported(name)}")
    arch = ARCHS[name]
    if name == "llama" and meta.get("llama.expert_count"):
        arch = MIXTRAL
    if is_bamba(name, meta, tensors):          # issue 30, the hybrid group: llama.cpp's conversion of Bamba
        arch = HYBRID5_ARCHS["granitehybrid/bamba"]

    def key(k):
        return f"{name}.{k}"

    def number(k, default=None, kind=int):
        v = meta.get(key(k), default)
        if isinstance(v, np.ndarray) and k in arch.layer_arrays and v.size:
            v = v.max().item()                  # a hybrid's per-layer kinds: its extra reads the array itself
        if isinstance(v, np.ndarray):           # a value per layer: Petit's families have one for all
            if v.size == 0 or not (v == v.flat[0]).all():
                raise ValueError(f"{where}: metadata {key(k)!r} differs between layers ({v.tolist()[:8]}...), "
                                 f"which the {arch.model_type} family does not support")
            v = v.flat[0].item()
        if v is None or isinstance(v, (bool, str)) or not isinstance(v, (int, float)):
            raise ValueError(f"{where}: metadata {key(k)!r} is {'missing' if v is None else repr(v)}: it should be "
                             f"a number")
        return kind(v)

    heads = number("attention.head_count")
    hidden = number("embedding_length")
    head_dim = number("attention.key_length", hidden // heads if heads else 0)
    if number("attention.value_length", head_dim) != head_dim and not arch.own_head_sizes:
        raise ValueError(f"{where}: keys of {head_dim} and values of {number('attention.value_length')} values per "
                         f"head are not supported")
    cfg = {"model_type": arch.model_type, "vocab_size": n_vocab, "hidden_size": hidden,
           # a file with experts in every layer may have no dense width (qwen35moe): the experts' then
           "intermediate_size": number("feed_forward_length", meta.get(key("expert_feed_forward_length"))),
           "num_hidden_layers": number("block_count"),
           "num_attention_heads": heads, "num_key_value_heads": number("attention.head_count_kv", heads),
           "head_dim": head_dim, "max_position_embeddings": number("context_length"),
           "rope_theta": number("rope.freq_base", 10000.0, float),
           "tie_word_embeddings": "output.weight" not in tensors}
    if arch.experts:
        cfg[arch.expert_key] = number("expert_count")
        cfg["num_experts_per_tok"] = number("expert_used_count")
    eps = meta.get(key("attention.layer_norm_rms_epsilon"))
    if eps is not None:
        cfg["rms_norm_eps"] = float(eps)
    rot = meta.get(key("rope.dimension_count"))
    if rot is not None and int(rot) != head_dim:
        cfg["partial_rotary_factor"] = int(rot) / head_dim
    cfg.update(_rope_scaling(meta, key, where))
    if arch.rope_pairs:
        cfg["rope_interleaved"] = True
    if arch.extra is not None:
        try:
            arch.extra(meta, key, cfg, lambda n: n in tensors)
            if arch.shape_extra is not None:
                arch.shape_extra(meta, key, cfg, lambda n: tuple(tensors[n].shape) if n in tensors else None)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return arch, cfg


def _rope_scaling(meta, key, where) -> dict:
    kind = meta.get(key("rope.scaling.type"), "none")
    factor = meta.get(key("rope.scaling.factor"))
    if kind in ("none", None) or (kind == "linear" and factor in (None, 1.0)):
        return {}
    if kind == "linear":
        return {"rope_scaling": {"rope_type": "linear", "factor": float(factor)}}
    if kind == "yarn":
        s = {"rope_type": "yarn", "factor": float(factor),
             "original_max_position_embeddings": int(meta[key("rope.scaling.original_context_length")])}
        for gguf_key, hf in (("rope.scaling.yarn_beta_fast", "beta_fast"), ("rope.scaling.yarn_beta_slow",
                                                                             "beta_slow"),
                             ("rope.scaling.attn_factor", "attention_factor")):
            if meta.get(key(gguf_key)) is not None:
                s[hf] = float(meta[key(gguf_key)])
        return {"rope_scaling": s}
    raise ValueError(f"{where}: metadata {key('rope.scaling.type')!r} is {kind!r}, which Petit does not run "
                     f"(none, linear and yarn are supported)")


# the state-space and hybrid architectures (gguf_ssm.py) and more Llama variants (gguf_variants.py) join ARCHS
ARCHS.update(SSM_ARCHS)
ARCHS.update(VARIANT_ARCHS)
ARCHS.update(MOE_ARCHS)
ARCHS.update(DENSE5_ARCHS)          # issue 30's dense group: granite_swa, minicpm, internlm2 (gguf_dense5.py)
ARCHS.update(MOE_B5_ARCHS)          # issue 30's moe_b group (gguf_moe_b5.py)
ARCHS.update(WRAP5_ARCHS)           # issue 30's wrap group: mistral3, exaone (gguf_wrap5.py)
# issue 30, the moe_a group: qwen35, qwen35moe (gguf_moe_a5.py)
ARCHS.update(MOE_A5_ARCHS)
ARCHS.update(MLA5_ARCHS)            # issue 30's mla group: deepseek32, glm-dsa (gguf_mla5.py)
ARCHS.update(RECUR5_ARCHS)          # issue 30's recur group: rwkv6 (gguf_recur5.py)
ARCHS.update(PHIMOE_ARCHS)          # issue 30's ggufx group: phimoe as the model (gguf_phimoe.py)
ARCHS.update(GGUFX5_ARCHS)          # issue 30's ggufx group: rwkv6qwen2, arwkv7 (gguf_ggufx5.py)
ARCHS.update(GEMMA5_ARCHS)          # issue 30's gemma group: gemma4 (gguf_gemma5.py)
ARCHS.update(KIMI5_ARCHS)           # issue 30's kimi_gguf follow-up: kimi-linear (gguf_kimi5.py)
ARCHS.update(MIMO5_ARCHS)           # issue 30's mimo group: mimo2 (gguf_mimo5.py)
ARCHS.update(FAM36C5_ARCHS)         # issue 36's fam36c group: bailingmoe2, Sarvam-30B (gguf_fam36c5.py)
ARCHS.update(FAM36O5_ARCHS)         # issue 36's fam36o group: hrm_text, HRM-Text (gguf_fam36o5.py)
ARCHS.update(fam36q_archs(ARCHS))   # issue 36's fam36q group: hy_v3, Hy3, codeshell (gguf_fam36q5.py)
ARCHS.update(fam36r_archs(ARCHS))   # issue 36's fam36r group: qwen*vl*, xverse, orion (gguf_fam36r5.py)
ARCHS.update(gg36s_archs())         # issue 36's gg36s group: laguna, minimax-01 (gguf_gg36s5.py)
ARCHS.update(GG36T5_ARCHS)          # issue 36's gg36t group: minimax-m3, MiniMax-M3 (gguf_gg36t5.py)
ARCHS.update(DSV4G5_ARCHS)          # issue 30's dsv4g group: deepseek4 (gguf_dsv4g5.py)
ARCHS.update(GEMB35_ARCHS)          # issue 35's gemb35 group: bert, nomic-bert embedding encoders (gguf_gemb35.py)
ARCHS.update(qwenvl_archs(ARCHS))   # issue 36's qwenvl group: glm4 / glm4moe with M-RoPE (gguf_qwenvl5.py)
ARCHS.update(NEWDEC5_ARCHS)         # issue 36's newdec group: mistral4, step35 (gguf_newdec5.py)
ARCHS.update(VLNEW5_ARCHS)          # issue 36's vlnew group: hunyuan_vl, HunyuanOCR's language model (gguf_vlnew5.py)
