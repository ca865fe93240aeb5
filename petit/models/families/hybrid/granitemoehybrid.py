"""GraniteMoeHybrid (Granite 4.0-H): Mamba-2 layers and attention layers (`layer_types`: "mamba" / "attention"),
each followed by GraniteMoeShared's MLP (routed experts plus a shared MLP; the shared MLP alone when
`num_local_experts` is 0), with Granite's four multipliers. The Mamba-2 mixer is mamba2's (kernels/ssm.c version 2:
its gated RMSNorm over all `mamba_expand x hidden_size` channels, as transformers computes it; mamba_ssm and llama.cpp
norm per group, which differs when `mamba_n_groups` > 1, and so does Petit with `mamba_norm_per_group`, a GGUF
file's); its time step is not clamped (transformers hard-codes (0, inf)). The attention layers have RoPE only when
`position_embedding_type` is "rope" (the releases: "nope"), and scale by `attention_multiplier`. The cache
(HybridCache) holds the attention layers' keys and values and the Mamba layers' conv and scan states."""
from dataclasses import dataclass

import numpy as np

from petit.models.families.moe import granitemoeshared
from petit.models.blocks.common import attention_weights, default_rope, embed_and_head, gated_mlp_weights, norm
from petit.models.blocks.config import boolean, positive_int
from petit.models.blocks.decoder import Arch, Decoder, Layer
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.ssm import Mamba

KINDS = ("mamba", "attention")


@dataclass(kw_only=True)
class GraniteMoeHybridConfig(granitemoeshared.GraniteMoeSharedConfig):
    layer_types: list | None = None
    layers_block_type: list | None = None       # the older key of layer_types
    mamba_n_heads: int = 128
    mamba_n_groups: int = 1
    mamba_d_state: int = 256
    mamba_d_head: int | str = "auto"
    mamba_d_conv: int = 4
    mamba_expand: int = 2
    mamba_conv_bias: bool = True
    mamba_proj_bias: bool = False
    position_embedding_type: str | None = None
    shared_intermediate_size: int = 1024
    mamba_norm_per_group: bool = False          # a Petit key (a GGUF file's): the gated norm per group, as llama.cpp
    model_type: str = "granitemoehybrid"
    _IGNORED = granitemoeshared.GraniteMoeSharedConfig._IGNORED | {"mamba_chunk_size"}

    def _validate(self):
        pe = self.position_embedding_type
        self.position_embedding_type = "rope"        # the parent checks it; here None / "nope" mean no RoPE
        super()._validate()
        self.position_embedding_type = pe
        if pe not in (None, "nope", "rope"):
            raise ValueError(f"config: position_embedding_type {pe!r} is not supported by the granitemoehybrid family "
                             f"(None, 'nope', 'rope')")
        n = self.num_hidden_layers
        types = self.layer_types if self.layer_types is not None else self.layers_block_type
        if types is None:
            raise ValueError("config: layer_types (or layers_block_type) is missing: which layers are Mamba and which "
                             "attention")
        if not isinstance(types, list) or len(types) != n or any(t not in KINDS for t in types):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(KINDS)}, got {types!r}")
        self.layer_types = types
        if self.mamba_d_head == "auto":
            self.mamba_d_head = self.mamba_expand * self.hidden_size // self.mamba_n_heads
        positive_int(self, "mamba_n_heads", "mamba_n_groups", "mamba_d_state", "mamba_d_head", "mamba_d_conv",
                     "mamba_expand")
        if self.mamba_n_heads * self.mamba_d_head != self.mamba_expand * self.hidden_size:
            raise ValueError(f"config: mamba_n_heads x mamba_d_head ({self.mamba_n_heads * self.mamba_d_head}) must "
                             f"equal mamba_expand x hidden_size ({self.mamba_expand * self.hidden_size})")
        if self.mamba_n_heads % self.mamba_n_groups:
            raise ValueError(f"config: mamba_n_heads {self.mamba_n_heads} is not a multiple of mamba_n_groups "
                             f"{self.mamba_n_groups}")
        if self.mamba_proj_bias:
            raise ValueError("config: mamba_proj_bias true is not supported by the granitemoehybrid family")
        boolean(self, "mamba_norm_per_group")


def hf_tensors(cfg: GraniteMoeHybridConfig, ckpt) -> dict:
    if cfg.num_local_experts:
        return granitemoeshared.hf_tensors(cfg, ckpt)
    return granitemoeshared.shared_tensors(cfg, ckpt)     # no experts: the shared MLP as each layer's dense MLP


@dataclass
class _Shared:
    """The shared MLP's shape for gated_mlp_weights."""
    hidden_size: int
    intermediate_size: int


def _mixer(cfg, t, p: str) -> Mamba:
    D, di, N, G, H, K = (cfg.hidden_size, cfg.mamba_expand * cfg.hidden_size, cfg.mamba_d_state,
                         cfg.mamba_n_groups, cfg.mamba_n_heads, cfg.mamba_d_conv)
    conv = di + 2 * G * N
    m = p + "mamba."
    return Mamba(t.weight(m + "in_proj.weight", (di + conv + H, D)),
                 t.array(m + "conv1d.weight", (conv, 1, K)).reshape(conv, K),
                 t.array(m + "conv1d.bias", (conv,)) if cfg.mamba_conv_bias else None, None, None,
                 t.array(m + "dt_bias", (H,)), -np.exp(t.array(m + "A_log", (H,)).astype(np.float32)),
                 t.array(m + "D", (H,)), t.weight(m + "out_proj.weight", (D, di)), N, K, 1, eps=cfg.rms_norm_eps,
                 version=2, n_heads=H, n_groups=G, norm_w=t.array(m + "norm.weight", (di,)),
                 norm_groups=G if cfg.mamba_norm_per_group else 1)


def build(cfg: GraniteMoeHybridConfig, t) -> Decoder:
    D, eps = cfg.hidden_size, cfg.rms_norm_eps
    rope = default_rope(cfg) if cfg.position_embedding_type == "rope" else None
    E, head = embed_and_head(t, cfg)
    layers, state_layers = [], []
    for i, kind in enumerate(cfg.layer_types):
        p = f"model.layers.{i}."
        if kind == "mamba":
            mix, attn = {"mamba": _mixer(cfg, t, p), "q": None, "k": None, "v": None, "o": None}, {}
            state_layers.append(i)
        else:
            mix, attn = {}, attention_weights(t, p, cfg, qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias)
        if cfg.num_local_experts:
            mlp = {"moe": moe_weights(t, p, cfg, n_experts=cfg.num_local_experts, top_k=cfg.num_experts_per_tok,
                                      inter=cfg.intermediate_size, norm_topk=True,
                                      router=f"{granitemoeshared.granitemoe.MOE}.router.layer",
                                      experts=f"{granitemoeshared.granitemoe.MOE}.experts", shared="shared_mlp",
                                      shared_inter=cfg.shared_intermediate_size)}
        else:
            mlp = gated_mlp_weights(t, p, _Shared(D, cfg.shared_intermediate_size), prefix="shared_mlp.")
        L = Layer(**mix, **attn, **mlp, rope=rope)
        L.attn_norm = norm(t, p + "input_layernorm", D, "rms", eps)
        L.mlp_norm = norm(t, p + "post_attention_layernorm", D, "rms", eps)
        layers.append(L)
    final = norm(t, "model.norm", D, "rms", eps)
    mixer = next(L.mamba for L in layers if L.mamba is not None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D,
                intermediate_size=max(cfg.intermediate_size, cfg.shared_intermediate_size),
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=cfg.head_dim, context_length=cfg.max_position_embeddings,
                embed_scale=cfg.embedding_multiplier, attn_scale=cfg.attention_multiplier,
                residual_scale=cfg.residual_multiplier, logit_scale=1.0 / cfg.logits_scaling,
                state_shapes=mixer.state_shapes, state_layers=tuple(state_layers))
    return Decoder(arch, E, layers, final, head)


Config = GraniteMoeHybridConfig
