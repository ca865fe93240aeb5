"""RWKV-4 (transformers' RwkvForCausalLM, model_type `rwkv`): a LayerNorm of the embeddings (blocks.0's pre_ln), then
blocks of time mixing and channel mixing, each on a LayerNorm of the stream, with token shift (the previous token's
normed input) mixed in through fixed lerps (time_mix_*: h mix + shift (1 - mix)):

- time mixing: k, v, sigmoid(r) projections; the WKV-4 recurrence per channel with the decay -exp(time_decay) and
  the bonus time_first, in transformers' running-maximum form; output(r wkv);
- channel mixing: sigmoid(receptance) x value(relu(key)^2).

The whole block is one C call (kernels/rwkv.c, Mamba version 8); its state is the two token shifts [2, D] and
num / den / max [3, D]. `rescale_every` R: in inference transformers divides each layer's attention.output and
feed_forward.value by 2^(layer // R) and halves the stream after every R layers; Petit scales those outputs instead
of the weights (the same up to rounding)."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.blocks.common import norm
from petit.models.blocks.config import ConfigMixin, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.ssm import Mamba


@dataclass(kw_only=True)
class RwkvConfig(ConfigMixin):
    vocab_size: int = 50277
    context_length: int = 1024
    hidden_size: int = 4096
    num_hidden_layers: int = 32
    attention_hidden_size: int | None = None
    intermediate_size: int | None = None
    layer_norm_epsilon: float = 1e-5
    rescale_every: int = 6
    tie_word_embeddings: bool = False
    model_type: str = "rwkv"
    unknown_keys: list = field(default_factory=list, repr=False)

    def _validate(self):
        D = self.hidden_size
        positive_int(self, "vocab_size", "hidden_size", "num_hidden_layers", "context_length")
        positive_number(self, "layer_norm_epsilon")
        if self.attention_hidden_size is None:
            self.attention_hidden_size = D
        if self.attention_hidden_size != D:
            raise ValueError(f"config: attention_hidden_size {self.attention_hidden_size} != hidden_size {D} is not "
                             f"supported by the rwkv family (no released checkpoint differs)")
        if self.intermediate_size is None:
            self.intermediate_size = 4 * D
        positive_int(self, "intermediate_size")
        if isinstance(self.rescale_every, bool) or not isinstance(self.rescale_every, int) or self.rescale_every < 0:
            raise ValueError(f"config: rescale_every must be a non-negative integer, got {self.rescale_every!r}")
        if not isinstance(self.tie_word_embeddings, bool):
            raise ValueError(f"config: tie_word_embeddings must be true or false, got {self.tie_word_embeddings!r}")


def build(cfg: RwkvConfig, t) -> Decoder:
    D, L, F, R, eps = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size, cfg.rescale_every, \
        cfg.layer_norm_epsilon
    embed = t.weight("rwkv.embeddings.weight", (cfg.vocab_size, D))
    ln0 = norm(t, "rwkv.blocks.0.pre_ln", D, "layer", eps, bias=True)

    def vec(name):
        return t.array(name, t.info(name)[1]).reshape(-1)

    layers = []
    for i in range(L):
        p = f"rwkv.blocks.{i}."
        a, c = p + "attention.", p + "feed_forward."
        w = [t.weight(a + n + ".weight", (D, D)) for n in ("key", "value", "receptance", "output")] + \
            [t.weight(c + "key.weight", (F, D)), t.weight(c + "value.weight", (D, F)),
             t.weight(c + "receptance.weight", (D, D))]
        r = dict(w=w, o=3, f=F, ln1_w=vec(p + "ln1.weight"), ln1_b=vec(p + "ln1.bias"), ln2_w=vec(p + "ln2.weight"),
                 ln2_b=vec(p + "ln2.bias"),
                 maa=np.stack([1.0 - vec(a + f"time_mix_{n}") for n in ("key", "value", "receptance")]),
                 cm_k=1.0 - vec(c + "time_mix_key"), cm_r=1.0 - vec(c + "time_mix_receptance"),
                 decay=vec(a + "time_decay"), bonus=vec(a + "time_first"),
                 scale=2.0 ** -(i // R) if R else 1.0, halve=bool(R) and (i + 1) % R == 0)
        zero = np.zeros(1, np.float32)
        layers.append(Layer(q=None, k=None, v=None, o=None,
                            mamba=Mamba(w[0], np.zeros((1, 1), np.float32), None, None, None, None, zero, zero,
                                        w[3], 1, 1, 1, version=8, eps=eps, rwkv=r)))
    final = norm(t, "rwkv.ln_out", D, "layer", eps, bias=True)
    head = embed if cfg.tie_word_embeddings else t.weight("head.weight", (cfg.vocab_size, D))
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=F, num_attention_heads=1,
                num_key_value_heads=1, head_dim=D, context_length=cfg.context_length,
                state_shapes=((2, D), (3, D)))
    return Decoder(arch, embed, layers, final, head, embed_norm=ln0)


Config = RwkvConfig
