"""The vocabulary the GGUF architecture tables share (gguf_archs, gguf_ssm, gguf_variants): llama.cpp's tensor
names and the Hugging Face names they stand for, the GGUFArch record, and the config extras several
architectures use. A module of its own so that the tables import it and gguf_archs imports them, in one
direction."""
from dataclasses import dataclass, field


# a layer tensor's llama.cpp name -> its Hugging Face name in a Llama-like checkpoint (after "model.layers.N.")
LLAMA_LAYER = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
SANDWICH_LAYER = dict(LLAMA_LAYER, post_attention_norm="post_attention_layernorm",
                      ffn_norm="pre_feedforward_layernorm", post_ffw_norm="post_feedforward_layernorm")
OLMO2_LAYER = dict(LLAMA_LAYER, post_attention_norm="post_attention_layernorm",
                   post_ffw_norm="post_feedforward_layernorm")
STARCODER2_LAYER = dict(LLAMA_LAYER, ffn_up="mlp.c_fc", ffn_down="mlp.c_proj")
GPT2_LAYER = {"attn_norm": "ln_1", "ffn_norm": "ln_2", "attn_output": "attn.c_proj", "ffn_up": "mlp.c_fc",
              "ffn_down": "mlp.c_proj"}
GPTNEOX_LAYER = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
                 "attn_output": "attention.dense", "ffn_up": "mlp.dense_h_to_4h", "ffn_down": "mlp.dense_4h_to_h"}
PHI2_LAYER = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
              "attn_v": "self_attn.v_proj", "attn_output": "self_attn.dense", "ffn_up": "mlp.fc1",
              "ffn_down": "mlp.fc2"}
STABLELM_LAYER = dict(LLAMA_LAYER, attn_q_norm="self_attn.q_layernorm", attn_k_norm="self_attn.k_layernorm")
LLAMA_GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
# fused matrices: llama.cpp's name -> the HF names of its row blocks, in order ("q", "kv" and "ff" give the sizes)
QKV = (("self_attn.q_proj", "q"), ("self_attn.k_proj", "kv"), ("self_attn.v_proj", "kv"))
# mixture of experts: the router (ffn_gate_inp), a shared expert (_shexp), and each layer's experts stacked in
# 3-D tensors [experts, rows, columns] (llama.cpp's name -> the HF name of expert {}'s matrix)
QWEN_MOE_LAYER = dict(LLAMA_LAYER, ffn_gate_inp="mlp.gate", ffn_gate_shexp="mlp.shared_expert.gate_proj",
                      ffn_up_shexp="mlp.shared_expert.up_proj", ffn_down_shexp="mlp.shared_expert.down_proj",
                      ffn_gate_inp_shexp="mlp.shared_expert_gate")
QWEN_EXPERTS = {"ffn_gate_exps": "mlp.experts.{}.gate_proj", "ffn_up_exps": "mlp.experts.{}.up_proj",
                "ffn_down_exps": "mlp.experts.{}.down_proj"}
MIXTRAL_LAYER = dict(LLAMA_LAYER, ffn_gate_inp="block_sparse_moe.gate")
MIXTRAL_EXPERTS = {"ffn_gate_exps": "block_sparse_moe.experts.{}.w1", "ffn_up_exps": "block_sparse_moe.experts.{}.w3",
                   "ffn_down_exps": "block_sparse_moe.experts.{}.w2"}
GRANITE_MOE_LAYER = dict(LLAMA_LAYER, ffn_gate_inp="block_sparse_moe.router.layer",
                         ffn_gate_shexp="shared_mlp.gate_proj", ffn_up_shexp="shared_mlp.up_proj",
                         ffn_down_shexp="shared_mlp.down_proj")
GRANITE_EXPERTS = {k: v.replace("mlp.", "block_sparse_moe.") for k, v in QWEN_EXPERTS.items()}
ONE_ROW = ("ffn_gate_inp_shexp",)      # a [1, hidden] matrix in Hugging Face's checkpoints, a vector in GGUF's


@dataclass(frozen=True)
class GGUFArch:
    """One GGUF architecture: the Petit family (`model_type`), where its tensors' Hugging Face names come from, and
    the config keys that differ from the common ones (`extra(meta, key, cfg, has)` sets them; `has(name)` tells
    whether the file holds a tensor)."""
    model_type: str
    layer_names: dict
    global_names: dict = field(default_factory=lambda: LLAMA_GLOBAL)
    prefix: str = "model.layers.{}."
    splits: dict = field(default_factory=dict)   # llama.cpp layer name -> ((HF name, size), ...) of a fused matrix
    rope_pairs: bool = False               # the converter permuted q / k for adjacent-pair RoPE
    norm_shift: float = 0.0                # subtracted from norm weights (Gemma's files store 1 + w)
    extra: object = None
    experts: dict = field(default_factory=dict)   # llama.cpp name of a stacked expert tensor -> HF name pattern
    expert_key: str = "num_experts"        # the config field of the expert count
    # a layer tensor's name after "blk.N." -> (shape, values): how its stored [torch-order] shape and values become
    # the Hugging Face tensor's (llama.cpp squeezes conv weights and stores Mamba's A as -exp(A_log)); either None
    fixes: dict = field(default_factory=dict)
    whole_names: dict = field(default_factory=dict)   # a layer name after "blk.N." -> its whole HF name there
    joins: object = None                   # joins(tensors, cfg) -> {HF name: [(GGUF name, (r0, r1)), ...]}
    layer_arrays: tuple = ()               # keys that may hold one value per layer (hybrids): read as their largest
    meta_tensors: object = None            # meta_tensors(meta, cfg, has) -> {HF name: float32 array} not stored as
                                           # tensors (metadata, or a default for a tensor the file may leave out)
    own_head_sizes: bool = False           # key_length / value_length are not one head size (extra reads them)
    # issue 30, moe_a: cfg_fixes(cfg) -> {a layer name after "blk.N.": Fix}, fixes that need the config (llama.cpp's
    # Qwen3.5 files hold the linear attention's value heads in another order)
    cfg_fixes: object = None
    # issue 30, the mla group: derived(tensors, cfg) -> {HF name: (shape, make, [GGUF names])}, matrices computed
    # from stored rows (make(rows) with rows(GGUF name, r0, r1) -> float32): MiniCPM3's per-head W_uk^T of attn_kv_b
    derived: object = None
    # issue 36, fam36o: config_names(tensors, cfg) -> {GGUF name: HF name} of tensors whose names need the config,
    # read before the tables (HRM-Text's blocks 0..2n-1 are its two stacks' layers, n from the metadata)
    config_names: object = None
    # issue 36, gg36s: shape_extra(meta, key, cfg, shape) sets config keys a tensor's shape tells (shape(GGUF name) ->
    # its stored shape, torch order, or None), after `extra` (Laguna's attention gate: a value a head or a value)
    shape_extra: object = None


def _biases(meta, key, cfg, has):
    cfg["attention_bias"] = has("blk.0.attn_q.bias")
    cfg["mlp_bias"] = has("blk.0.ffn_up.bias")


def _granite(meta, key, cfg, has):
    _biases(meta, key, cfg, has)
    for gguf_key, hf in (("embedding_scale", "embedding_multiplier"), ("residual_scale", "residual_multiplier"),
                         ("attention.scale", "attention_multiplier"), ("logit_scale", "logits_scaling")):
        if meta.get(key(gguf_key)) is not None:
            cfg[hf] = float(meta[key(gguf_key)])
