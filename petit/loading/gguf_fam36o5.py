"""llama.cpp's hrm_text files (issue 36, the fam36o group), read as the hrm_text family: its converter
(conversion/hrm_text.py) writes HRM-Text's two stacks as blocks 0..n-1 (L_module's layers) and n..2n-1 (H_module's),
n = `hrm.layers_per_stack`, with `block_count` the passes' layers (n x `hrm.h_cycles` x (`hrm.l_cycles` + 1),
transformers' cache slots); its graph (src/models/hrm-text.cpp) runs them as transformers does:

- the fused gate | q | k | v rows split into `attn_gate`, `attn_q`, `attn_k`, `attn_v`, RoPE on halves (NEOX, q / k
  not permuted), the heads' outputs x sigmoid(attn_gate x) before `attn_output`, a SwiGLU MLP, weightless RMSNorms
  (none stored); `hrm.z_l_init` the low state's start, `embedding_scale` the embeddings' (absent: none, 1);
- no bias: llama.cpp loads none for the gate, o_proj or the MLP, so a file with q / k / v biases (attention_bias
  without the gate's and o_proj's) is refused; one key / value head per query head, as the family has;
- `hrm.prefix_lm` is kept as the config's flag: llama.cpp's graph is causal, as Petit's plain call."""
from petit.loading.gguf_moe import _number
from petit.loading.gguf_names import LLAMA_GLOBAL, GGUFArch

ARCH = "hrm_text"
LAYER = {"attn_gate": "self_attn.gate_proj", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
         "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj",
         "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def _hrm_text(meta, key, cfg, has):
    def get(k, default=None, kind=int):
        return _number(meta, key, k, default, kind, ARCH)

    heads, kv = cfg["num_attention_heads"], cfg.pop("num_key_value_heads")
    if kv != heads:
        raise ValueError(f"metadata {key('attention.head_count_kv')!r} ({kv}) differs from "
                         f"{key('attention.head_count')!r} ({heads}): HRM-Text's attention has a key / value head "
                         f"per query head")
    if has("blk.0.attn_q.bias"):
        raise ValueError("q / k / v biases without the output gate's and o_proj's (llama.cpp's hrm_text loads "
                         "none): the hrm_text family's attention_bias has all five")
    cfg.update(num_layers_per_stack=get("hrm.layers_per_stack"), H_cycles=get("hrm.h_cycles"),
               L_cycles=get("hrm.l_cycles"), embedding_scale=get("embedding_scale", 0.0, float) or 1.0,
               prefix_lm=bool(meta.get(key("hrm.prefix_lm"), False)), attention_bias=False, mlp_bias=False)


def _stack_names(tensors, cfg) -> dict:
    """{GGUF name: HF name}: blocks [0, n) are L_module's layers, [n, 2n) H_module's; the low state's start."""
    n, out = cfg["num_layers_per_stack"], {"hrm.z_l_init": "model.z_L_init"}
    for name in tensors:
        parts = name.split(".")
        if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in LAYER and \
                parts[3] == "weight" and int(parts[1]) < 2 * n:
            i = int(parts[1])
            stack, j = ("L", i) if i < n else ("H", i - n)
            out[name] = f"model.{stack}_module.layers.{j}.{LAYER[parts[2]]}.weight"
    return out


FAM36O5_ARCHS = {ARCH: GGUFArch("hrm_text", {}, LLAMA_GLOBAL, extra=_hrm_text, config_names=_stack_names)}
