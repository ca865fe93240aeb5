"""nanochat (Karpathy's nanochat, `karpathy/nanochat-d32`): a Llama-shaped block in which every norm is an RMSNorm
without weight (the two pre-norms, the final norm, one more of the embeddings before the first layer, and q / k per
head), the q / k norms act after RoPE, the MLP is plain fc2(act(fc1 x)) (relu² by default, no gate), the logits
are soft-capped (15 · tanh(logits / 15)), and RoPE turns the other way: its rotate_half is cat(x2, −x1), not
cat(−x2, x1), so each pair turns by −angle (the sin table negated). q/k/v/o biases follow `attention_bias`."""
from dataclasses import dataclass

from petit.models.blocks.common import llama_like
from petit.models.blocks.config import DecoderConfig, activation, check_decoder
from petit.models.blocks.decoder import Norm
from petit.models.blocks.rope import Rope


@dataclass(kw_only=True)
class NanoChatConfig(DecoderConfig):
    hidden_act: str = "relu2"
    rms_norm_eps: float = 1e-6
    final_logit_softcapping: float | None = 15.0
    attention_bias: bool = False
    model_type: str = "nanochat"

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta"), ("tie_word_embeddings", "attention_bias"))
        self.act = activation(self, "hidden_act", "nanochat")
        if self.final_logit_softcapping is not None:
            check_decoder(self, ("final_logit_softcapping",))


class ReversedRope(Rope):
    """RoPE turning each pair by −angle: the sin table negated (cos is even)."""

    def tables(self, seq_len: int):
        cos, sin = super().tables(seq_len)
        if getattr(self, "_of", None) is not sin:       # one negated copy per table, kept: the plan holds pointers
            self._of, self._neg = sin, -sin
        return cos, self._neg


def build(cfg: NanoChatConfig, t):
    D, F, eps = cfg.hidden_size, cfg.intermediate_size, cfg.rms_norm_eps
    rope = ReversedRope(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling, cfg.max_position_embeddings)

    def mlp(i, p):
        return {"up": t.weight(p + "mlp.fc1.weight", (F, D)), "down": t.weight(p + "mlp.fc2.weight", (D, F))}

    dec = llama_like(t, cfg, eps=eps, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, rope_for=lambda i: rope,
                     mlp_for=mlp, norm_weights=False, act=cfg.act, context_length=rope.context_length,
                     logit_softcap=cfg.final_logit_softcapping or 0.0)
    for L in dec.layers:
        L.q_norm, L.k_norm, L.norm_after_rope = Norm("rms", eps), Norm("rms", eps), True
    dec.embed_norm = Norm("rms", eps)
    return dec


Config = NanoChatConfig
