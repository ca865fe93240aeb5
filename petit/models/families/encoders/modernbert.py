"""ModernBERT (`modernbert`, ModernBertModel: gte-modernbert, modernbert-embed, granite-embedding-english-r2): the
encoder of embedding models (issue 35), family kind "encoder". The blocks, norms, GeGLU and two RoPE bases of
petit/models/families/dense/modernbert_decoder.py (the causal variant, which states them) over bidirectional attention;
what differs:

- q, k and v are one matrix `attn.Wqkv` [3 hidden, hidden] (and bias, with attention_bias), its rows q, k, v in that
  order, split when read.
- A sliding layer's query sees the tokens within sliding_window = local_attention // 2 of it on either side
  (transformers' bidirectional sliding mask, |i - j| <= 64 for local_attention 128): Petit's window of
  sliding_window + 1 under the bidirectional flag; a full layer sees the whole text.
- The output is the final LayerNorm's (`final_norm`): ModernBertModel has no head. Task models' checkpoints
  (ModernBertForMaskedLM ...) are prefixed `model.`; their head and classifier are left unread."""
from dataclasses import dataclass

from petit.models.families.dense import modernbert_decoder as mbd
from petit.models.blocks.decoder import Arch, Decoder

KIND = "encoder"
UNREAD = ("head.dense.weight", "head.dense.bias", "head.norm.weight", "head.norm.bias", "decoder.bias",
          "classifier.weight", "classifier.bias")


@dataclass(kw_only=True)
class ModernBertConfig(mbd.ModernBertDecoderConfig):
    model_type: str = "modernbert"

    def _validate(self):
        super()._validate()
        local = self.local_attention
        if isinstance(local, int) and self.sliding_window != local // 2:
            raise ValueError(f"config: sliding_window {self.sliding_window} is not local_attention // 2 "
                             f"({local} // 2): ModernBERT's window is the one local_attention sets")


def _prefix(names) -> str:
    return "model." if "model.embeddings.tok_embeddings.weight" in names else ""


def hf_tensors(cfg: ModernBertConfig, ckpt) -> dict:
    """Wi split as the decoder's; Wqkv's rows into q_proj, k_proj, v_proj."""
    P, D = _prefix(set(ckpt.names())), cfg.hidden_size
    out = mbd.split_wi(cfg, ckpt, P)
    for i in range(cfg.num_hidden_layers):
        for kind, shape in (("weight", (D, D)), ("bias", (D,))):
            src = f"{P}layers.{i}.attn.Wqkv.{kind}"
            if src in ckpt:
                out.update(split_qkv(ckpt, src, f"{P}layers.{i}.attn.", kind, shape))
    return out


def split_qkv(ckpt, src: str, stem: str, kind: str, shape: tuple) -> dict:
    """A fused Wqkv `src` (also nomic_bert's) as stem + q_proj / k_proj / v_proj . kind: shape[0] rows each."""
    n = shape[0]
    return {f"{stem}{name}.{kind}": (shape, lambda j=j: ckpt.f32(src)[j * n:(j + 1) * n], (src,))
            for j, name in enumerate(("q_proj", "k_proj", "v_proj"))}


def build(cfg: ModernBertConfig, t):
    D, F, H = cfg.hidden_size, cfg.intermediate_size, cfg.num_attention_heads
    P, types = _prefix(t.names()), cfg.types()
    E = t.weight(P + "embeddings.tok_embeddings.weight", (cfg.vocab_size, D))
    layers = mbd.blocks(cfg, t, P, lambda i: cfg.sliding_window + 1 if types[i] == "sliding_attention" else 0,
                        bidirectional=True)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=H,
                num_key_value_heads=H, head_dim=D // H, context_length=cfg.max_position_embeddings, act=cfg.act)
    # no LM head: the word embedding stands in the Decoder's head slot, never run (an encoder's Model refuses logits)
    return Decoder(arch, E, layers, mbd.layer_norm(cfg, t, P + "final_norm"), E,
                   embed_norm=mbd.layer_norm(cfg, t, P + "embeddings.norm"))


Config = ModernBertConfig
