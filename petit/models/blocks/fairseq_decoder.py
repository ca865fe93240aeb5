"""The pre-LN decoder fairseq wrote and two Hugging Face families keep under its names (`xglm`, `biogpt`): per layer
self_attn_layer_norm, attention with biases on q / k / v / out_proj, final_layer_norm, fc1 -> act -> fc2 with biases;
LayerNorms with weight and bias at eps 1e-5; a final LayerNorm `layer_norm`; positions added to the scaled embeddings.
Each family states its config and where its positions come from."""
import numpy as np

from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm

EPS = 1e-5      # nn.LayerNorm's default: neither family reads a config key for it


def build(t, prefix: str, D: int, F: int, H: int, n_layers: int, vocab: int, ctx: int, act: str, scale_embedding: bool,
          pos: np.ndarray, head_name: str | None) -> Decoder:
    """The decoder over checkpoint names under `prefix` ("model." / "biogpt."); pos [positions, D] the table added to
    the embeddings; head_name None ties the head to the embeddings."""
    def ln(name):
        return Norm("layer", EPS, t.vec(name + ".weight", (D,)), t.vec(name + ".bias", (D,)))

    E = t.weight(prefix + "embed_tokens.weight", (vocab, D))
    layers = []
    for i in range(n_layers):
        p = f"{prefix}layers.{i}."
        a = p + "self_attn."
        L = Layer(q=t.weight(a + "q_proj.weight", (D, D)), k=t.weight(a + "k_proj.weight", (D, D)),
                  v=t.weight(a + "v_proj.weight", (D, D)), o=t.weight(a + "out_proj.weight", (D, D)),
                  up=t.weight(p + "fc1.weight", (F, D)), down=t.weight(p + "fc2.weight", (D, F)),
                  up_b=t.vec(p + "fc1.bias", (F,)), down_b=t.vec(p + "fc2.bias", (D,)),
                  attn_norm=ln(p + "self_attn_layer_norm"), mlp_norm=ln(p + "final_layer_norm"), rope=None)
        L.q_b, L.k_b, L.v_b, L.o_b = (t.vec(a + f"{n}.bias", (D,)) for n in ("q_proj", "k_proj", "v_proj", "out_proj"))
        layers.append(L)
    head = E if head_name is None else t.weight(head_name, (vocab, D))
    arch = Arch(vocab_size=vocab, hidden_size=D, intermediate_size=F, num_attention_heads=H, num_key_value_heads=H,
                head_dim=D // H, context_length=ctx, act=act, embed_scale=float(np.sqrt(D)) if scale_embedding else 1.0)
    return Decoder(arch, E, layers, ln(prefix + "layer_norm"), head, pos_embed=pos)
