"""StarCoder2: LayerNorm with bias (norm_epsilon), biases on every projection (use_bias), a plain GELU MLP
(c_fc -> act -> c_proj), optional sliding window, tied LM head by default."""
from dataclasses import dataclass

from petit.models.blocks.common import arch, attention_weights, default_rope, embed_and_head, norm
from petit.models.blocks.config import DecoderConfig, activation, check_decoder
from petit.models.blocks.decoder import Decoder, Layer


@dataclass(kw_only=True)
class Starcoder2Config(DecoderConfig):
    num_key_value_heads: int | None = 2
    hidden_act: str = "gelu_pytorch_tanh"
    max_position_embeddings: int = 4096
    norm_epsilon: float = 1e-5
    sliding_window: int | None = None
    use_bias: bool = True
    tie_word_embeddings: bool = True
    model_type: str = "starcoder2"

    def _validate(self):
        check_decoder(self, ("norm_epsilon", "rope_theta"), ("tie_word_embeddings", "use_bias"), window=True)
        self.act = activation(self, "hidden_act", "starcoder2")


def build(cfg: Starcoder2Config, t):
    D, F, eps, b = cfg.hidden_size, cfg.intermediate_size, cfg.norm_epsilon, cfg.use_bias
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg)
    layers = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        m = p + "mlp."
        L = Layer(**attention_weights(t, p, cfg, qkv_bias=b, o_bias=b), up=t.weight(m + "c_fc.weight", (F, D)),
                  down=t.weight(m + "c_proj.weight", (D, F)), rope=rope, window=cfg.sliding_window or 0,
                  attn_norm=norm(t, p + "input_layernorm", D, "layer", eps, bias=True),
                  mlp_norm=norm(t, p + "post_attention_layernorm", D, "layer", eps, bias=True))
        if b:
            L.up_b, L.down_b = t.vec(m + "c_fc.bias", (F,)), t.vec(m + "c_proj.bias", (D,))
        layers.append(L)
    final = norm(t, "model.norm", D, "layer", eps, bias=True)
    return Decoder(arch(cfg, context_length=rope.context_length, act=cfg.act), E, layers, final, head)


Config = Starcoder2Config
