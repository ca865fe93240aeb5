"""A 50M-parameter Llama (hidden 768, 8 layers, 12 query / 4 kv heads, MLP 2048) with seeded random weights, written
as a Hugging Face folder (bf16 safetensors, config.json, the fixtures' tokenizer): the size at which `petit verify`
used to report false failures. Initialised like a real checkpoint: small embeddings (sd 0.02, so the first norm
sees a residual of mean square ~4e-4, as trained models do), matrices N(0, 1/fan_in), norm weights near 1."""
import json
import shutil
import struct
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).parent / "fixtures" / "hf" / "llama"
CONFIG = dict(model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=320, hidden_size=768,
              intermediate_size=2048, num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=4,
              max_position_embeddings=512, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
              torch_dtype="bfloat16")


def write_safetensors(path: Path, tensors: dict) -> None:
    """bf16 safetensors (the float32 values' upper 16 bits, rounded to nearest even)."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        u = np.ascontiguousarray(a, np.float32).view(np.uint32)
        b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for b in blobs:
            f.write(b)


def make_llama50m(folder: Path, seed: int = 50) -> Path:
    rng = np.random.default_rng(seed)
    c = CONFIG
    D, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = D // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), np.float32) / np.float32(np.sqrt(cols)))

    W = {"model.embed_tokens.weight": rng.standard_normal((V, D), np.float32) * np.float32(0.02)}
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        W.update({p + "input_layernorm.weight": 1 + 0.1 * rng.standard_normal(D, np.float32),
                  p + "self_attn.q_proj.weight": mat(q, D), p + "self_attn.k_proj.weight": mat(kv, D),
                  p + "self_attn.v_proj.weight": mat(kv, D), p + "self_attn.o_proj.weight": mat(D, q),
                  p + "post_attention_layernorm.weight": 1 + 0.1 * rng.standard_normal(D, np.float32),
                  p + "mlp.gate_proj.weight": mat(F, D), p + "mlp.up_proj.weight": mat(F, D),
                  p + "mlp.down_proj.weight": mat(D, F)})
    W["model.norm.weight"] = 1 + 0.1 * rng.standard_normal(D, np.float32)
    W["lm_head.weight"] = mat(V, D) * np.float32(4)        # logits of sd ~4, like the fixtures'
    folder.mkdir(parents=True, exist_ok=True)
    write_safetensors(folder / "model.safetensors", W)
    (folder / "config.json").write_text(json.dumps(c, indent=1))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
        shutil.copy(FIXTURE / name, folder / name)
    return folder


def n_params() -> int:
    c = CONFIG
    D, F, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    kv = c["num_key_value_heads"] * D // c["num_attention_heads"]
    return 2 * V * D + D + L * (2 * D * D + 2 * D * kv + 3 * D * F + 2 * D)
