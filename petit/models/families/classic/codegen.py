"""CodeGen (Salesforce): GPT-J's block (one LayerNorm, parallel attention and MLP, interleaved partial rotary,
biased MLP and LM head) with a fused `qkv_proj` laid out for 4 model-parallel shards: its output rows are 4 blocks,
each [q | v | k] (v before k) of hidden_size / 4 rows, block b holding heads b·H/4 .. (b+1)·H/4 - 1. It is split
into q, k and v when read, so a converted .petit holds `attn.q_proj` / `k_proj` / `v_proj`."""
from dataclasses import dataclass

from petit.models.families.classic import gptj

MP = 4     # CodeGen's fixed shard count (transformers' mp_num)


@dataclass
class CodeGenConfig(gptj.GPTJConfig):
    model_type: str = "codegen"

    def _validate(self):
        super()._validate()
        if self.n_embd % MP or self.n_head % MP:
            raise ValueError(f"config: n_embd {self.n_embd} and n_head {self.n_head} must divide by {MP} "
                             f"(CodeGen's qkv_proj is laid out in {MP} shards)")


def hf_tensors(cfg: CodeGenConfig, ckpt) -> dict:
    D = cfg.n_embd
    out = {}
    for i in range(cfg.n_layer):
        a = f"{gptj.P}h.{i}.attn."
        w = a + "qkv_proj.weight"
        if w in ckpt:
            for j, part in ((0, "q_proj"), (1, "v_proj"), (2, "k_proj")):
                out[a + part + ".weight"] = ((D, D), lambda w=w, j=j: ckpt.f32(w).reshape(MP, 3, D // MP, D)[:, j]
                                             .reshape(D, D), (w,))
    return out


def build(cfg: CodeGenConfig, t):
    return gptj.build(cfg, t)


Config = CodeGenConfig
