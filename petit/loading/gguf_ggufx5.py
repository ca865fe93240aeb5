"""llama.cpp's rwkv6qwen2 (QRWKV6) files, issue 30's ggufx group: RWKV-6's time mixing as gated linear attention on
Qwen2's blocks (petit/models/families/recurrent/rwkv6qwen2.py), the tensors under `model.layers.N.<llama.cpp's name>`.
arwkv7 stays refused (petit/models/refusals.py says why).

What the converter (conversion/rwkv.py RWKV6Qwen2Model) writes: the head count 0 (heads = embedding_length /
wkv.head_size), `attention.head_count_kv` (grouped keys and values), `attention.layer_norm_rms_epsilon`,
`token_shift_count` 1, `time_mix_extra_dim` / `time_decay_extra_dim` (the LoRA widths), the token-shift LoRA permuted
from the checkpoint's r, k, v, w, g order to rwkv6's w, k, v, r, g and transposed as rwkv6's, the five lerps in
time_mix_lerp_fused; Qwen2's q / k / v biases as the receptance / key / value biases."""
from petit.loading.gguf_names import GGUFArch

NAMES = ("attn_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "time_mix_w1", "time_mix_w2", "time_mix_lerp_x",
         "time_mix_lerp_fused", "time_mix_decay", "time_mix_decay_w1", "time_mix_decay_w2", "time_mix_key",
         "time_mix_value", "time_mix_receptance", "time_mix_gate", "time_mix_output")
LAYER = {n: n for n in NAMES}


def _rwkv6qwen2(meta, key, cfg, has):
    for k in ("num_attention_heads", "rope_theta", "head_dim"):
        cfg.pop(k, None)
    cfg.update(head_size=int(meta[key("wkv.head_size")]), context_length=int(cfg.pop("max_position_embeddings")))
    shifts = int(meta.get(key("token_shift_count"), 1))
    if shifts != 1:
        raise ValueError(f"token_shift_count {shifts} (Qwen2's blocks shift the time mixing's input only: 1)")
    if has("blk.0.time_mix_first.weight"):
        raise ValueError("an rwkv6qwen2 file with time_mix_first holds RWKV-6's own time mixing (the bonus, a silu "
                         "gate, the group norm) on Qwen2's blocks; Petit reads the bonus-free QRWKV form only")
    cfg.update(lora_rank_tokenshift=int(meta[key("time_mix_extra_dim")]),
               lora_rank_decay=int(meta[key("time_decay_extra_dim")]))


GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
GGUFX5_ARCHS = {
    "rwkv6qwen2": GGUFArch("rwkv6qwen2", LAYER, GLOBAL, extra=_rwkv6qwen2),
}
