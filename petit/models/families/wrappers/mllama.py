"""Llama 3.2 Vision as released (`mllama`, MllamaForConditionalGeneration: Llama-3.2-11B / 90B-Vision): a vision model
and its projector beside an MllamaTextModel (config `text_config`, weights `language_model.model.*` and
`language_model.lm_head.weight`, or `model.language_model.*` and `lm_head.weight`). The text model is Llama's
self-attention blocks with cross-attention blocks interleaved at `cross_attention_layers` (default [3, 8, ..., 38]),
which attend to the image's states. transformers skips a cross-attention layer whole (its attention, its MLP, its
gates) when it has no image states and none cached, so a text-only prompt runs the other layers alone: MllamaForCausalLM
(transformers' registry class, which reads the same folder) and the full class give the same logits. Petit runs
those layers as a Llama, layer j being the j-th self-attention layer, and says once that the vision model is not run;
the cross-attention layers' tensors are never read. A converted file keeps the config as it is and holds those
layers alone, as model.layers.0 ... K-1.

What else differs from Llama: embed_tokens has vocab_size + 8 rows (the image token id vocab_size and 7 more), of
which Petit reads the first vocab_size (an id past them is refused, as for any model: only images use it); the
head is text_config's own (MllamaTextConfig: untied); head_dim is always hidden_size / num_attention_heads;
MllamaTextConfig's defaults (8 kv heads, 131072 positions, RoPE base 5e5, RMSNorm eps 1e-5)."""
import dataclasses
from dataclasses import dataclass

from petit.models.families.dense import llama

from petit.models.blocks import wrapper

TOWER = ("vision_model.", "multi_modal_projector.", "model.vision_model.", "model.multi_modal_projector.")
OWN_KEYS = ("image_token_index", "image_token_id")
CROSS_DEFAULT = [3, 8, 13, 18, 23, 28, 33, 38]


@dataclass(kw_only=True)
class MllamaConfig(llama.LlamaConfig):
    cross_attention_layers: list | None = None      # None: CROSS_DEFAULT
    num_key_value_heads: int | None = 8
    max_position_embeddings: int = 131072
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    model_type: str = "mllama"
    _IGNORED = frozenset({"dropout"})

    @classmethod
    def from_dict(cls, d):
        flat = wrapper.flatten(d, "mllama", OWN_KEYS)
        hd = flat.get("head_dim") if isinstance(flat, dict) else None
        if hd is not None and hd != flat.get("hidden_size", 0) // flat.get("num_attention_heads", 1):
            raise ValueError(f"config: head_dim {hd!r} is not hidden_size / num_attention_heads, which Llama 3.2 "
                             f"Vision's attention always uses (transformers' RoPE would read head_dim)")
        return super().from_dict(flat)

    def _validate(self):
        super()._validate()
        if self.cross_attention_layers is None:
            self.cross_attention_layers = list(CROSS_DEFAULT)
        cross = self.cross_attention_layers
        if not isinstance(cross, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in cross):
            raise ValueError(f"config: cross_attention_layers must be a list of layer indices, got {cross!r}")
        self.self_layers = [i for i in range(self.num_hidden_layers) if i not in cross]
        if not self.self_layers:
            raise ValueError("config: every layer is a cross-attention layer: a text-only prompt runs none")


def _text_tensors(cfg: MllamaConfig, view) -> dict:
    """The j-th self-attention layer as model.layers.j, the embedding's first vocab_size rows."""
    out = {}
    for j, i in enumerate(cfg.self_layers):
        src = f"model.layers.{i}."
        for n in view.names():
            if n.startswith(src):
                name = f"model.layers.{j}." + n[len(src):]
                out[name] = (view.info(n)[1], lambda n=n: view.f32(n), (n,))
    E = "model.embed_tokens.weight"
    out[E] = ((cfg.vocab_size, cfg.hidden_size), lambda: view.f32(E)[:cfg.vocab_size], (E,))
    return out


def hf_tensors(cfg: MllamaConfig, ckpt) -> dict:
    cross = tuple(f"{p}layers.{i}." for p in wrapper.TEXT_PREFIXES for i in cfg.cross_attention_layers)
    return wrapper.hf_tensors(cfg, ckpt, TOWER + cross, text_tensors=_text_tensors)


def build(cfg: MllamaConfig, t):
    return llama.build(dataclasses.replace(cfg, num_hidden_layers=len(cfg.self_layers)), t)


Config = MllamaConfig
