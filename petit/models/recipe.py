"""Which type each weight matrix is written in: one type for all (`--q4_0`, `--q4_k` ...), or a recipe that spends
more bits where a model is most sensitive, as llama.cpp's Q4_K_M does:

- `q4_k_m`: Q4_K, with Q6_K for the output head (and the token embedding when it is the head too) and for the value
  and MLP-down matrices of the first and last eighth of the layers and every third one between (llama.cpp's
  `use_more_bits`; a mixture of experts' expert and shared-expert down matrices likewise). An untied token
  embedding stays Q4_K: only one row of it is read per token. A checkpoint that
  stores q, k and v as one matrix (Phi-3's qkv_proj, GPT-2's c_attn, GPT-NeoX's query_key_value) gives all three
  Q5_K, as llama.cpp gives its fused attn_qkv: a GGUF file keeps them one tensor of one type.

A matrix whose rows do not divide into its type's blocks takes the next type that fits, as llama.cpp's quantizer
falls back: Q4_K and Q5_K to Q5_0, Q6_K to Q8_0 (rows of 256 values), and the 32-value types to f16.
"""
import re

RECIPES = ("q4_k_m",)
BLOCK_VALUES = {"q8_0": 32, "q4_0": 32, "q5_0": 32, "q4_k": 256, "q5_k": 256, "q6_k": 256}
FALLBACK = {"q4_k": "q5_0", "q5_k": "q5_0", "q6_k": "q8_0", "q5_0": "f16", "q8_0": "f16", "q4_0": "f16"}

_LAYER = re.compile(r"\.(?:layers|h|blocks)\.(\d+)\.")
_VALUE = re.compile(r"(?:v_proj|\.value)\.weight$")
_DOWN = re.compile(r"(?:mlp|feed_forward|block_sparse_moe)\.(?:experts\.\d+\.|shared_expert\.)?"
                   r"(?:down_proj|c_proj|fc2|dense_4h_to_h|w2)\.weight$")
_HEAD = ("lm_head.weight", "embed_out.weight")
_EMBED = re.compile(r"(?:embed_tokens|wte|embed_in)\.weight$")
_FUSED_QKV = re.compile(r"(?:qkv_proj|c_attn|query_key_value|Wqkv)\.weight$")
_QKV = re.compile(r"(?:q_proj|k_proj|v_proj)\.weight$")


def fitting(dtype: str, cols: int) -> str:
    """`dtype`, or the first type of its fallback chain whose blocks divide a row of `cols` values."""
    while dtype in BLOCK_VALUES and cols % BLOCK_VALUES[dtype]:
        dtype = FALLBACK[dtype]
    return dtype


def _more_bits(layer: int, n_layers: int) -> bool:
    return layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2


class Recipe:
    """A recipe's type for each matrix, given every tensor name of the model (the layer count and whether the
    embedding is the head come from them)."""

    def __init__(self, name: str, names):
        if name not in RECIPES:
            raise ValueError(f"unknown quantization recipe {name!r} (recipes: {', '.join(RECIPES)})")
        names = list(names)
        self.name = name
        self.n_layers = 1 + max((int(m.group(1)) for n in names if (m := _LAYER.search(n))), default=0)
        self.tied = not any(n in _HEAD or n.endswith(".lm_head.weight") for n in names)
        self.fused_qkv = any(_FUSED_QKV.search(n) for n in names)

    def __call__(self, name: str) -> str:
        if name in _HEAD or (self.tied and _EMBED.search(name)):
            return "q6_k"
        m = _LAYER.search(name)
        if self.fused_qkv and _QKV.search(name):
            return "q5_k"
        if m and (_VALUE.search(name) or _DOWN.search(name)) and _more_bits(int(m.group(1)), self.n_layers):
            return "q6_k"
        return "q4_k"
