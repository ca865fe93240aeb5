"""Gemma 4 (text, `gemma4_text`; Gemma4ForCausalLM), as transformers 5's modeling_gemma4.py computes it.

Gemma 3's sandwich block (x w norms, not 1 + w) with what Gemma 4 adds:

- per-layer attention shapes (`per_layer_config`, by default the full layers' `global_head_dim` and, with
  `attention_k_eq_v`, `num_global_key_value_heads`): the KV cache holds each layer's heads in a slot sized for the
  widest layer;
- `attention_k_eq_v`: the full layers have no v_proj; their values are the keys before the key norm, RMS-normed
  without weight as every layer's values are;
- proportional RoPE on the full layers: frequencies base^(-2i / head_dim) for the first partial_rotary_factor x
  head_dim / 2 pairs (i, i + head_dim / 2) of the whole head, the other pairs not rotated;
- per-layer inputs as Gemma 3n's (`embed_tokens_per_layer` x sqrt(P) plus the normed `per_layer_model_projection`
  of the embeddings, x 2^-1/2), each layer adding norm(per_layer_projection(act(per_layer_input_gate(x)) x its
  slice)) to its residual after the MLP (`hidden_size_per_layer_input` 0: none);
- KV sharing of the last `num_kv_shared_layers` layers (as Gemma 3n's), whose MLPs are twice as wide with
  `use_double_wide_mlp`;
- `layer_scalar`: each layer's output times a learned scalar.

- routed experts beside the MLP (`enable_moe_block`, Gemma 4 26B-A4B): the block's input (the residual before the
  MLP) goes through `pre_feedforward_layernorm_2` to the experts and, RMS-normed without weight x `router.scale` /
  sqrt(hidden), to the router (softmax, top-k renormalised, x `router.per_expert_scale`); the MLP's output
  (`post_feedforward_layernorm_1`) and the experts' (`post_feedforward_layernorm_2`) are summed before
  `post_feedforward_layernorm`. Petit's MoE kernel runs it on the normed input: the router's scale over the norm's
  weight is folded into the router's columns (`router.folded`) and each expert's per_expert_scale into its down
  matrix, when read (hf_tensors); the router stays float32.
"""
from dataclasses import dataclass

import numpy as np

from petit.models.blocks.common import LAYER_TYPES, norm
from petit.models.blocks.config import activation, check_decoder, positive_int, positive_number
from petit.models.blocks.decoder import Arch, Decoder, Layer, Norm
from petit.models.families.dense.gemma import GemmaConfig
from petit.models.blocks.gemma3n_decoder import Gemma3nDecoder, _G3nScratch
from petit.models.blocks.moe import Moe
from petit.models.blocks.rope import ProportionalRope, Rope
from petit.native import ACTIVATIONS, Weight

_PER_LAYER_KEYS = ("head_dim", "num_key_value_heads")


@dataclass(kw_only=True)
class Gemma4TextConfig(GemmaConfig):
    hidden_activation: str = "gelu_pytorch_tanh"
    head_dim: int | None = 256
    max_position_embeddings: int = 131_072
    rope_theta: float = 1_000_000.0             # the full layers' (rope_parameters["full_attention"])
    full_rope_type: str = "proportional"        # "proportional" or "default"
    partial_rotary_factor: float = 0.25         # the full layers' proportional share
    rope_local_base_freq: float = 10000.0       # the sliding layers' (rope_parameters["sliding_attention"])
    sliding_window: int = 512
    layer_types: list | None = None
    final_logit_softcapping: float | None = None
    use_bidirectional_attention: str | None = None
    vocab_size_per_layer_input: int = 262_144
    hidden_size_per_layer_input: int = 256
    attention_k_eq_v: bool = False
    num_kv_shared_layers: int = 0
    enable_moe_block: bool = False
    use_double_wide_mlp: bool = False
    num_experts: int | None = None
    top_k_experts: int | None = None
    moe_intermediate_size: int | None = None
    per_layer_config: dict | None = None
    global_head_dim: int = 512
    num_global_key_value_heads: int | None = None
    model_type: str = "gemma4_text"

    _ACT_KEY = "hidden_activation"

    @classmethod
    def from_dict(cls, d):
        """rope_parameters read here: transformers 5's per-layer-type entries, the full layers' "proportional" kind
        among them, which the shared RoPE reader does not know."""
        if isinstance(d, dict) and isinstance(d.get("rope_parameters"), dict):
            d = dict(d)
            rp = d.pop("rope_parameters")
            for kind, entry in rp.items():
                if kind not in LAYER_TYPES or not isinstance(entry, dict):
                    raise ValueError(f"config: rope_parameters.{kind}: Gemma 4 has full_attention and "
                                     f"sliding_attention entries, got {entry!r}")
                rope_type = entry.get("rope_type", "default")
                extra = sorted(set(entry) - {"rope_type", "rope_theta", "partial_rotary_factor"})
                if extra or rope_type not in (("default", "proportional") if kind == "full_attention" else
                                              ("default",)):
                    raise ValueError(f"config: rope_parameters.{kind}: a {rope_type!r} RoPE with "
                                     f"{', '.join(extra) or 'no other keys'} is not supported by gemma4 (it runs the "
                                     f"default RoPE, and proportional RoPE on full layers, without scaling)")
                if "rope_theta" in entry:
                    d["rope_theta" if kind == "full_attention" else "rope_local_base_freq"] = entry["rope_theta"]
                if kind == "full_attention":
                    d["full_rope_type"] = rope_type
                    d["partial_rotary_factor"] = entry.get("partial_rotary_factor", 1.0)
                elif "partial_rotary_factor" in entry and entry["partial_rotary_factor"] != 1.0:
                    raise ValueError("config: rope_parameters.sliding_attention: a partial_rotary_factor is not "
                                     "supported by gemma4 (its sliding layers rotate the whole head)")
        return super().from_dict(d)

    def _validate(self):
        check_decoder(self, ("rms_norm_eps", "rope_theta", "rope_local_base_freq"),
                      ("tie_word_embeddings", "attention_bias", "attention_k_eq_v", "enable_moe_block",
                       "use_double_wide_mlp"))
        self.act = activation(self, self._ACT_KEY, self.model_type)
        if self.use_bidirectional_attention not in (None, "vision"):
            raise ValueError(f"config: use_bidirectional_attention={self.use_bidirectional_attention!r} is not "
                             f"supported (Petit runs causal decoders; 'vision' only changes image tokens' mask)")
        if self.attention_bias:
            raise ValueError("config: attention_bias=true is not supported by gemma4 (its attention has no biases "
                             "in transformers' checkpoints)")
        if self.enable_moe_block:
            positive_int(self, "num_experts", "top_k_experts", "moe_intermediate_size")
            if self.top_k_experts > self.num_experts:
                raise ValueError(f"config: top_k_experts {self.top_k_experts} is above num_experts "
                                 f"{self.num_experts}")
        if self.rope_scaling is not None and (self.rope_scaling.get("rope_type") != "longrope" or
                                              self.rope_scaling.get("long_factor") !=
                                              self.rope_scaling.get("short_factor")):
            raise ValueError(f"config: rope_scaling {self.rope_scaling!r} is not supported by gemma4 (only a GGUF "
                             f"file's rope_freqs table of the full layers, as one long-rope factor list)")
        if self.full_rope_type not in ("default", "proportional"):
            raise ValueError(f"config: full_rope_type must be default or proportional, got {self.full_rope_type!r}")
        if isinstance(self.partial_rotary_factor, bool) or not isinstance(self.partial_rotary_factor, (int, float)) \
                or not 0.0 < self.partial_rotary_factor <= 1.0:
            raise ValueError(f"config: partial_rotary_factor must be in (0, 1], got {self.partial_rotary_factor!r}")
        positive_int(self, "sliding_window", "global_head_dim")
        if self.hidden_size_per_layer_input:
            positive_int(self, "hidden_size_per_layer_input", "vocab_size_per_layer_input")
            if self.vocab_size_per_layer_input < self.vocab_size:
                raise ValueError(f"config: vocab_size_per_layer_input {self.vocab_size_per_layer_input} is below "
                                 f"vocab_size {self.vocab_size}: transformers reads embed_tokens_per_layer at every "
                                 f"input id")
        if self.final_logit_softcapping is not None:
            positive_number(self, "final_logit_softcapping")
        n, k = self.num_hidden_layers, self.num_kv_shared_layers
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
            raise ValueError(f"config: num_kv_shared_layers must be in 0..{n}, got {k!r}")
        if k == n:
            raise ValueError("config: every layer shares another model's keys and values (num_kv_shared_layers = "
                             "num_hidden_layers): a draft model (Gemma 4's assistant) that reads its target model's "
                             "KV cache, which Petit does not hand between models")
        self.shapes = self._shapes()
        src = self.kv_sources()
        for i, j in enumerate(src):
            if self.shapes[i] != self.shapes[j]:
                raise ValueError(f"config: layer {i} shares layer {j}'s keys and values but its heads differ "
                                 f"({self.shapes[i]} vs {self.shapes[j]} (head_dim, key-value heads))")

    def types(self) -> list[str]:
        n = self.num_hidden_layers
        given = self.layer_types
        if given is None:                   # transformers' default: 5 sliding to 1 full, the last layer full
            given = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
            given[-1] = "full_attention"
        if not isinstance(given, list) or len(given) != n or any(t not in LAYER_TYPES for t in given):
            raise ValueError(f"config: layer_types must list {n} values of {' / '.join(LAYER_TYPES)}, got {given!r}")
        if given[-1] != "full_attention":
            raise ValueError("config: the last layer must be full_attention (transformers forces it)")
        return given

    def _shapes(self) -> list[tuple[int, int]]:
        """(head_dim, key-value heads) of each layer."""
        types, n = self.types(), self.num_hidden_layers
        plc = self.per_layer_config
        if plc is None:                     # transformers' derivation when the config does not spell it out
            over = {"head_dim": self.global_head_dim}
            if self.attention_k_eq_v and self.num_global_key_value_heads is not None:
                over["num_key_value_heads"] = self.num_global_key_value_heads
            plc = {str(i): over for i, t in enumerate(types) if t == "full_attention"}
        if not isinstance(plc, dict):
            raise ValueError(f"config: per_layer_config must be an object, got {plc!r}")
        out = [(self.head_dim, self.num_key_value_heads)] * n
        for key, entry in plc.items():
            if not str(key).isdigit() or not 0 <= int(key) < n or not isinstance(entry, dict) or \
                    set(entry) - set(_PER_LAYER_KEYS):
                raise ValueError(f"config: per_layer_config[{key!r}] must give a layer in 0..{n - 1} "
                                 f"{' / '.join(_PER_LAYER_KEYS)}, got {entry!r}")
            hd, kv = entry.get("head_dim", self.head_dim), entry.get("num_key_value_heads", self.num_key_value_heads)
            for name, v in (("head_dim", hd), ("num_key_value_heads", kv)):
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                    raise ValueError(f"config: per_layer_config[{key!r}].{name} must be a positive integer, got {v!r}")
            if hd % 2 or self.num_attention_heads % kv:
                raise ValueError(f"config: per_layer_config[{key!r}]: head_dim {hd} must be even and "
                                 f"num_attention_heads {self.num_attention_heads} divisible by {kv} key-value heads")
            out[int(key)] = (hd, kv)
        return out

    def kv_sources(self) -> list[int]:
        types, n = self.types(), self.num_hidden_layers
        first = n - self.num_kv_shared_layers
        src = list(range(n))
        for i in range(first, n):
            own = [j for j in range(first) if types[j] == types[i]]
            if not own:
                raise ValueError(f"config: layer {i} ({types[i]}) shares the keys and values of an earlier "
                                 f"{types[i]} layer, but layers 0..{first - 1} have none")
            src[i] = own[-1]
        return src


def hf_tensors(cfg: Gemma4TextConfig, ckpt, name=lambda n: n) -> dict:
    """The experts of each MoE layer as Petit's MoE kernel reads them: each expert's gate / up / down from
    transformers 5's 3-D `experts.gate_up_proj` [E, 2F, D] and `experts.down_proj` [E, D, F] (down x its
    router.per_expert_scale), and `router.folded` = router.proj x router.scale / (sqrt(hidden) x
    pre_feedforward_layernorm_2.weight) per column, the router on the experts' normed input. `name` maps a text
    model's name to the checkpoint's (the wrapper's model.language_model.)."""
    if not cfg.enable_moe_block:
        return {}
    E, F, D = cfg.num_experts, cfg.moe_intermediate_size, cfg.hidden_size
    out = {}
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        fused, down = name(p + "experts.gate_up_proj"), name(p + "experts.down_proj")
        proj, scale, pes = name(p + "router.proj.weight"), name(p + "router.scale"), name(p + "router.per_expert_scale")
        w2 = name(p + "pre_feedforward_layernorm_2.weight")
        held = {}

        def part(src, e, rows=None, mul=None, held=held):
            def make():
                if src not in held:
                    held.clear()
                    held[src] = ckpt.f32(src)
                a = held[src][e, rows[0]:rows[1]] if rows else held[src][e]
                return a * ckpt.f32(mul).reshape(-1)[e] if mul else a
            return make

        def folded(proj=proj, scale=scale, w2=w2):
            w = ckpt.f32(w2).astype(np.float64)
            if (w == 0).any():
                raise ValueError(f"{w2} has a zero: the router cannot be folded onto the experts' normed input")
            k = ckpt.f32(scale).astype(np.float64) * D ** -0.5 / w
            return (ckpt.f32(proj).astype(np.float64) * k[None, :]).astype(np.float32)

        for e in range(E):
            x = f"{p}experts.{e}."
            out[x + "gate_proj.weight"] = ((F, D), part(fused, e, (0, F)), [fused])
            out[x + "up_proj.weight"] = ((F, D), part(fused, e, (F, 2 * F)), [fused])
            out[x + "down_proj.weight"] = ((D, F), part(down, e, mul=pes), [down, pes])
        out[p + "router.folded.weight"] = ((E, D), folded, [proj, scale, w2])
    return out


class FactorRope(Rope):
    """llama.cpp's form of the full layers' RoPE in a gemma4 GGUF file: the whole head in halves at base^(-2i /
    head_dim), each frequency divided by its `rope_freqs` factor (1e30 for the pairs proportional RoPE leaves)."""

    def __init__(self, head_dim: int, base: float, factors, max_pos: int):
        super().__init__(head_dim, base, None, max_pos)
        self.factors = np.asarray(factors, np.float32)
        if self.factors.shape != (head_dim // 2,):
            raise ValueError(f"rope_freqs has {self.factors.size} factors, expected {head_dim // 2} (the full "
                             f"layers' head_dim / 2)")

    def inv_freq(self, seq_len: int):
        return (self._default(self.base) / self.factors).astype(np.float32), 1.0


@dataclass
class Gemma4Layer(Layer):
    v_norm: Norm | None = None
    k_eq_v: bool = False                # the values are the keys before their norm
    heads: tuple = (0, 0)               # (head_dim, key-value heads)
    ple_gate: Weight | None = None
    ple_proj: Weight | None = None
    ple_norm: Norm | None = None
    kv_source: int = 0
    scalar: float = 1.0
    mlp_out_norm: Norm | None = None    # post_feedforward_layernorm_1 (with experts)
    moe_in_norm: Norm | None = None     # pre_feedforward_layernorm_2
    moe_out_norm: Norm | None = None    # post_feedforward_layernorm_2


_LAYER_MATRICES = ("q", "k", "v", "o", "gate", "up", "down", "ple_gate", "ple_proj")


class Gemma4Decoder(Decoder):
    """The Gemma 4 forward (see the module docstring), described once for the plan and the per-op path."""

    def __init__(self, arch, embed, layers, final_norm, lm_head, *, ple_table, ple_model_proj, ple_norm, ple_width,
                 ple_scales):
        super().__init__(arch, embed, layers, final_norm, lm_head)
        self.ple_table, self.ple_model_proj, self.ple_norm = ple_table, ple_model_proj, ple_norm
        self.ple_width, self.ple_scales = ple_width, ple_scales

    def matrices(self) -> list[Weight]:
        out = {id(W): W for L in self.layers for W in (getattr(L, n) for n in _LAYER_MATRICES) if W is not None}
        out.update((id(W), W) for L in self.layers if L.moe for W in L.moe.matrices())
        for W in (self.ple_model_proj, self.lm_head):
            if W is not None:
                out[id(W)] = W
        return list(out.values())

    def named_matrices(self) -> list:
        """(Weight, tensor name) beyond a layer's q, k, v, o, gate, up, down (trainer/verify.py's matrix check)."""
        out = [] if self.ple_model_proj is None else [(self.ple_model_proj, "model.per_layer_model_projection.weight")]
        for i, L in enumerate(self.layers):
            if L.ple_gate is not None:
                p = f"model.layers.{i}."
                out += [(L.ple_gate, p + "per_layer_input_gate.weight"),
                        (L.ple_proj, p + "per_layer_projection.weight")]
        return out

    def replace_matrices(self, new: dict) -> None:
        for L in self.layers:
            for n in _LAYER_MATRICES:
                W = getattr(L, n)
                if W is not None and id(W) in new:
                    setattr(L, n, new[id(W)])
            if L.moe is not None:
                L.moe.replace(new)
        if self.ple_model_proj is not None:
            self.ple_model_proj = new.get(id(self.ple_model_proj), self.ple_model_proj)
        if id(self.embed) in new:
            self.embed = new[id(self.embed)]
        self.lm_head = new.get(id(self.lm_head), self.lm_head)
        self._plan = None

    def scratch(self, T: int):
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _G3nScratch(self.arch, max(T, 16), 1, len(self.layers), max(self.ple_width, 1), 1)
        return self._scratch

    # the step is described once (_describe) for both the plan and the per-op oracle, as Gemma 3n's is
    _build_plan = Gemma3nDecoder._build_plan
    _forward_oracle = Gemma3nDecoder._forward_oracle
    plan_ops, oracle = staticmethod(Gemma3nDecoder.plan_ops), Gemma3nDecoder.oracle

    def _describe(self, s, scratch) -> None:
        arch, buf, cap = self.arch, scratch.p, scratch.cap
        D, H = arch.hidden_size, arch.num_attention_heads
        L_n, P = len(self.layers), self.ple_width
        act = ACTIVATIONS[arch.act]
        s.embed(self.embed, buf["resid"], D, arch.embed_scale, None)
        if P:
            s.matmul(-1, [self.ple_model_proj], buf["resid"], [buf["ple_proj"]])
            s.ple(-1, self.ple_table, buf["ple_proj"], L_n, P, self.ple_norm, *self.ple_scales, buf["ple_row"],
                  buf["ple"], cap * P)
        for i, layer in enumerate(self.layers):
            hd, KV = layer.heads
            F = layer.up.shape[0]
            s.norm(i, layer.attn_norm, buf["resid"], 1, D, buf["normed"])
            if layer.kv_source == i:
                if layer.k_eq_v:
                    s.matmul(i, [layer.q, layer.k], buf["normed"], [buf["q"], buf["k"]])
                    s.copy(i, buf["k"], KV * hd, 0, buf["v"], KV * hd, 0, 1, KV * hd)
                else:
                    s.matmul(i, [layer.q, layer.k, layer.v], buf["normed"], [buf["q"], buf["k"], buf["v"]])
                s.norm(i, layer.q_norm, buf["q"], H, hd, buf["q"])
                s.norm(i, layer.k_norm, buf["k"], KV, hd, buf["k"])
                s.norm(i, layer.v_norm, buf["v"], KV, hd, buf["v"])
                s.rope_store(i, layer.rope, buf["q"], buf["k"], buf["v"], H, KV, hd)
            else:                                   # keys and values of layer kv_source, already in the cache
                s.matmul(i, [layer.q], buf["normed"], [buf["q"]])
                s.norm(i, layer.q_norm, buf["q"], H, hd, buf["q"])
                s.rope(i, layer.rope, buf["q"], buf["k"], H, 0, hd)
            s.attention(layer.kv_source, buf["q"], H, KV, hd, 1.0, 0.0, layer.window, buf["att"])
            s.matmul(i, [layer.o], buf["att"], [buf["branch"]])
            s.norm(i, layer.post_attn_norm, buf["branch"], 1, D, buf["branch"])
            s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            s.norm(i, layer.mlp_norm, buf["resid"], 1, D, buf["normed"])
            s.matmul(i, [layer.gate, layer.up], buf["normed"], [buf["gate"], buf["up"]])
            s.glu(i, act, buf["gate"], buf["up"], F, buf["mlp_hidden"])
            s.matmul(i, [layer.down], buf["mlp_hidden"], [buf["branch"]])
            if layer.moe is not None:               # the experts beside the MLP, on the block's input
                s.norm(i, layer.mlp_out_norm, buf["branch"], 1, D, buf["branch"])
                s.norm(i, layer.moe_in_norm, buf["resid"], 1, D, buf["normed_mlp"])
                s.moe(i, layer.moe.c(cap), buf["normed_mlp"], buf["laurel"])
                s.norm(i, layer.moe_out_norm, buf["laurel"], 1, D, buf["laurel"])
                s.axpy(i, buf["branch"], 1.0, buf["laurel"], D)
            s.norm(i, layer.post_mlp_norm, buf["branch"], 1, D, buf["branch"])
            s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            if P:
                s.matmul(i, [layer.ple_gate], buf["resid"], [buf["ple_gate"]])
                s.glu(i, act, buf["ple_gate"], buf["ple"] + i * cap * P, P, buf["ple_gate"])
                s.matmul(i, [layer.ple_proj], buf["ple_gate"], [buf["branch"]])
                s.norm(i, layer.ple_norm, buf["branch"], 1, D, buf["branch"])
                s.axpy(i, buf["resid"], 1.0, buf["branch"], D)
            if layer.scalar != 1.0:
                s.rows(i, 4, buf["resid"], None, D, layer.scalar)


def build(cfg: Gemma4TextConfig, t, prefix: str = "model."):
    D, n_layers, eps = cfg.hidden_size, cfg.num_hidden_layers, cfg.rms_norm_eps
    H, P = cfg.num_attention_heads, cfg.hidden_size_per_layer_input or 0
    E = t.weight(prefix + "embed_tokens.weight", (cfg.vocab_size, D))
    types, src = cfg.types(), cfg.kv_sources()
    first_shared = n_layers - cfg.num_kv_shared_layers
    rms = lambda name, width=D: norm(t, name, width, "rms", eps)     # noqa: E731  (x w: not Gemma's 1 + w)
    ropes = {}

    def rope_of(kind, hd):
        key = (kind, hd)
        if key not in ropes:
            if kind == "sliding_attention":
                ropes[key] = Rope(hd, cfg.rope_local_base_freq, None, cfg.max_position_embeddings)
            elif (cfg.rope_scaling or {}).get("rope_type") == "longrope":     # a GGUF file's rope_freqs table
                ropes[key] = FactorRope(hd, cfg.rope_theta, cfg.rope_scaling["long_factor"],
                                        cfg.max_position_embeddings)
            elif cfg.full_rope_type == "proportional":
                ropes[key] = ProportionalRope(hd, cfg.rope_theta, int(cfg.partial_rotary_factor * hd // 2),
                                              cfg.max_position_embeddings)
            else:
                ropes[key] = Rope(hd, cfg.rope_theta, None, cfg.max_position_embeddings)
        return ropes[key]

    layers = []
    for i in range(n_layers):
        p = f"{prefix}layers.{i}."
        a = p + "self_attn."
        hd, KV = cfg.shapes[i]
        own = src[i] == i
        k_eq_v = cfg.attention_k_eq_v and types[i] == "full_attention"
        F = cfg.intermediate_size * (2 if cfg.use_double_wide_mlp and i >= first_shared else 1)
        L = Gemma4Layer(q=t.weight(a + "q_proj.weight", (H * hd, D)),
                        k=t.weight(a + "k_proj.weight", (KV * hd, D)) if own else None,
                        v=t.weight(a + "v_proj.weight", (KV * hd, D)) if own and not k_eq_v else None,
                        o=t.weight(a + "o_proj.weight", (D, H * hd)),
                        gate=t.weight(p + "mlp.gate_proj.weight", (F, D)),
                        up=t.weight(p + "mlp.up_proj.weight", (F, D)),
                        down=t.weight(p + "mlp.down_proj.weight", (D, F)),
                        rope=rope_of(types[i], hd),
                        window=cfg.sliding_window if types[i] == "sliding_attention" else 0)
        L.heads, L.k_eq_v, L.kv_source = (hd, KV), k_eq_v, src[i]
        L.q_norm = rms(a + "q_norm", hd)
        if own:
            L.k_norm, L.v_norm = rms(a + "k_norm", hd), Norm("rms", eps)
        L.attn_norm, L.post_attn_norm = rms(p + "input_layernorm"), rms(p + "post_attention_layernorm")
        L.mlp_norm, L.post_mlp_norm = rms(p + "pre_feedforward_layernorm"), rms(p + "post_feedforward_layernorm")
        if cfg.enable_moe_block:
            n_exp, Fe = cfg.num_experts, cfg.moe_intermediate_size
            x = p + "experts."
            L.moe = Moe(t.float_weight(p + "router.folded.weight", (n_exp, D)),
                        [t.weight(f"{x}{e}.gate_proj.weight", (Fe, D)) for e in range(n_exp)],
                        [t.weight(f"{x}{e}.up_proj.weight", (Fe, D)) for e in range(n_exp)],
                        [t.weight(f"{x}{e}.down_proj.weight", (D, Fe)) for e in range(n_exp)],
                        cfg.top_k_experts, True, act=cfg.act)
            L.mlp_out_norm = rms(p + "post_feedforward_layernorm_1")
            L.moe_in_norm = rms(p + "pre_feedforward_layernorm_2")
            L.moe_out_norm = rms(p + "post_feedforward_layernorm_2")
        if P:
            L.ple_gate = t.weight(p + "per_layer_input_gate.weight", (P, D))
            L.ple_proj = t.weight(p + "per_layer_projection.weight", (D, P))
            L.ple_norm = rms(p + "post_per_layer_input_norm")
        if t.has(p + "layer_scalar"):
            L.scalar = float(t.vec(p + "layer_scalar", (1,)).a[0])
        layers.append(L)
    table = model_proj = ple_norm = None
    if P:
        table = t.weight(prefix + "embed_tokens_per_layer.weight", (cfg.vocab_size_per_layer_input, n_layers * P))
        model_proj = t.weight(prefix + "per_layer_model_projection.weight", (n_layers * P, D))
        ple_norm = rms(prefix + "per_layer_projection_norm", P)
    final = rms(prefix + "norm")
    head = E if cfg.tie_word_embeddings else t.weight("lm_head.weight", (cfg.vocab_size, D))
    hd_max, kv_max = max(s[0] for s in cfg.shapes), max(s[1] for s in cfg.shapes)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D, intermediate_size=max(L.up.shape[0] for L in layers),
                num_attention_heads=H, num_key_value_heads=kv_max, head_dim=hd_max,
                context_length=cfg.max_position_embeddings, act=cfg.act, attn_scale=1.0,
                embed_scale=float(np.float32(D ** 0.5)), logit_softcap=cfg.final_logit_softcapping or 0.0)
    scales = (float(np.float32(D ** -0.5)), float(np.float32(P ** 0.5)) if P else 1.0,
              float(np.float32(2.0 ** -0.5)))
    return Gemma4Decoder(arch, E, layers, final, head, ple_table=table, ple_model_proj=model_proj, ple_norm=ple_norm,
                         ple_width=P, ple_scales=scales)


Config = Gemma4TextConfig
