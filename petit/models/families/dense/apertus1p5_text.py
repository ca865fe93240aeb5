"""Apertus 1.5's language model (`apertus1p5_text`, transformers 5): Apertus's block over an extended vocabulary (text,
then the visual and audio code ranges) whose LM head may be pruned to the text prefix, `output_vocab_size` rows
(None: the whole vocabulary). The input embeddings keep every row, and the logits are the head's width, output id i
being token id i. Petit runs the text model, so its vocabulary is the head's: an input id past it (a visual or
audio code, which only the multimodal model's tokenizers produce) is refused like any id out of range. xIELU's
a_p and a_n are not rounded to bfloat16 (`xielu_bf16` false): transformers 5 keeps its parameters in the dtype the
model is loaded in."""
import dataclasses
from dataclasses import dataclass

from petit.models.families.dense import apertus


@dataclass(kw_only=True)
class Apertus1p5TextConfig(apertus.ApertusConfig):
    output_vocab_size: int | None = None
    # transformers 5 computes xIELU's softplus in the parameters' own dtype, float32 in a float32 load (4.57 kept
    # them in bfloat16): a_p and a_n are not rounded
    xielu_bf16: bool = False
    model_type: str = "apertus1p5_text"

    def _validate(self):
        super()._validate()
        v, n = self.output_vocab_size, self.vocab_size
        if v == n:
            self.output_vocab_size = v = None       # the whole vocabulary, as transformers normalises it
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= n):
            raise ValueError(f"config: output_vocab_size must be null or in [1, vocab_size {n}], got {v!r}")
        if v is not None and self.tie_word_embeddings:
            raise ValueError(f"config: a pruned LM head (output_vocab_size {v} < vocab_size {n}) cannot be tied to "
                             f"the input embeddings")


def build(cfg: Apertus1p5TextConfig, t):
    rows = cfg.output_vocab_size
    if rows is None:
        return apertus.build(cfg, t)
    # the block as Apertus's, the embedding as head for the moment; then the pruned head and the logits' width
    dec = apertus.build(dataclasses.replace(cfg, tie_word_embeddings=True), t)
    dec.lm_head = t.weight("lm_head.weight", (rows, cfg.hidden_size))
    dec.arch.vocab_size = rows
    return dec


hf_tensors = apertus.hf_tensors       # the 0-d xIELU buffers as one-value vectors
Config = Apertus1p5TextConfig
