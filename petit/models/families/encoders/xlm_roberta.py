"""XLM-RoBERTa and RoBERTa (bge-m3, multilingual-e5, all-roberta / all-distilroberta): the encoders of embedding
models (issue 35), BERT's (petit/models/families/encoders/bert.py) but for where the positions start.

- A token's position id is padding_idx + 1 + its index (transformers counts the non-padding tokens before it; Petit
  runs each text alone, unpadded, so that is its index): the position table is read from row pad_token_id + 1 on,
  token type 0's row folded in as bert does, and a text holds max_position_embeddings - pad_token_id - 1 tokens (512
  of 514). The rows below are those of padding and of nothing; they are left unread. A text that itself holds the
  padding token (its literal `<pad>`) would have transformers give it position padding_idx and shift the tokens
  after it; Petit counts it as any token.
- Checkpoints of the task models (XLMRobertaForMaskedLM ...) are prefixed `roberta.`; the LM head is not read."""
from dataclasses import dataclass

from petit.models.families.encoders import bert

KIND = "encoder"
UNREAD = bert.UNREAD


@dataclass
class XLMRobertaConfig(bert.BertConfig):
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1
    max_position_embeddings: int = 514
    model_type: str = "xlm-roberta"

    def _validate(self):
        super()._validate()
        pad = self.pad_token_id
        if isinstance(pad, bool) or not isinstance(pad, int) or not 0 <= pad < self.max_position_embeddings - 1:
            raise ValueError(f"config: pad_token_id {pad!r} must be an integer in 0..max_position_embeddings - 2 "
                             f"({self.max_position_embeddings - 2}): positions start at pad_token_id + 1")


def hf_tensors(cfg: XLMRobertaConfig, ckpt) -> dict:
    return bert.hf_tensors(cfg, ckpt, "roberta.", cfg.pad_token_id + 1)


def build(cfg: XLMRobertaConfig, t):
    return bert.build(cfg, t, "roberta.", cfg.pad_token_id + 1)


Config = XLMRobertaConfig
