"""Qwen4-Exp's text model (`qwen4_exp_text`, transformers 5.25's Qwen4ExpForCausalLM; the released `qwen4_exp` folders
hold it as `text_config`): Qwen3.5-MoE's blocks (Gated DeltaNet and gated attention, MoE with a shared expert in
every layer: petit/models/families/hybrid/qwen3_5_moe_text.py, here with `norm_topk_prob` read) inside
hyper-connections, and no input / post-attention / final norms:

- the residual is `hc_count` streams of hidden_size values (the embedding repeated). Before each block (the attention
  or DeltaNet, then the MoE) a gated residual: the streams RMS-normed one by one, x (1 + w) with a weight per stream
  (hn); gates g = up silu(down hn / n) (rank `hc_lowrank`), one per stream and value; the block's input the mean over
  the streams of sigmoid(g) hn; its output y added to stream j times 2 sigmoid(inject hn / n)_j. The model's output
  is that mix once more (`hyper_connection_mixer`, no injection), then the LM head. The plan (Qwen4ExpDecoder) runs
  them as a per-stream NORM, MATMULs, SCALE_COLS (the 1 / n), BIAS_ACT (silu), Q4X_MIX (kernels/hc.c: the gated
  mean and 2 sigmoid) and HC_POST with an identity stream mix.
- every attention layer is `indexed_attention`: its QSA indexer (`indexer_*`) picks, per query, the best
  `indexer_budget / indexer_compress_ratio` complete blocks of `indexer_compress_ratio` visible positions (scored
  by sum over its heads of relu(q_h . k_b) / sqrt(dim), k_b the block's mean raw key RMS-normed and rotated at the
  block's first position), plus the incomplete last block; the layer attends over those positions only (every one
  while a query sees fewer than budget + ratio). Qsa below: kernels/qsa.c's QSA_INDEX, then kernels/mm3.c's
  MM3_ATTENTION over the chosen blocks; the raw keys live in a cache slot of their own after the layers'.

- the PLE layers (`ple_layer_ids`): hashed n-gram embeddings gating each stream, through a dilated causal conv, added
  before the layer's first gated residual (petit/models/families/hybrid/qwen4_exp_ple.py).

Refused: `output_gate_type` sigmoid (the DeltaNet's gated norm is silu here), hc_count outside 2..16, attention
layers without the indexer's fields."""
from dataclasses import dataclass, field

import numpy as np

from petit.models.families.hybrid import qwen3_5_moe_text, qwen3_next
from petit.models.families.hybrid import qwen4_exp_ple as ple
from petit.models.blocks.block_sparse import BlockSparse
from petit.models.blocks.common import default_rope, embed_and_head, norm
from petit.models.blocks.config import positive_int
from petit.models.blocks.decoder import Arch, Decoder, Layer, Vec
from petit.models.blocks.moe import moe_weights
from petit.models.blocks.hy_v4_plan import plan_streams
from petit.models.blocks.plan import Plan, PlanOracle, scratch_arrays
from petit.native import ACTIVATIONS, GLU_ACTIVATIONS, ffi, lib

QSA = ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")
HC_MAX = 16                     # kernels/hc.c's largest stream count


@dataclass(kw_only=True)
class Qwen4ExpTextConfig(qwen3_5_moe_text.Qwen35MoeTextConfig):
    num_experts: int = 512
    num_experts_per_tok: int = 10
    norm_topk_prob: bool = True
    hc_count: int = 4
    hc_lowrank: int = 320
    ple_layer_ids: list = field(default_factory=list)
    ple_embed_dim: int | None = None
    ple_conv_kernel_size: int = 4
    ngram_size: int = 3
    heads_per_ngram: int = 8
    ngram_vocab_size_base: int = 20_000_000
    make_ngram_vocab_size_divisible_by: int = 128
    seed: int = 1234
    split_ngram_parts: int = 512
    indexer_n_heads: int | None = None
    indexer_kv_heads: int | None = None
    indexer_head_dim: int | None = None
    indexer_budget: int | None = None
    indexer_compress_ratio: int | None = None
    output_gate_type: str | None = None
    eos_token_id: int | list | None = None          # PLE: the token an n-gram does not reach past
    model_type: str = "qwen4_exp_text"
    # transformers' derived count of conv states a layer's cache keeps (3 with PLE): nothing to read
    _IGNORED = qwen3_5_moe_text.Qwen35MoeTextConfig._IGNORED | {"number_of_conv_states"}
    _KINDS = ("linear_attention", "indexed_attention", "full_attention")
    _NOT_READ = ("intermediate_size", "mlp_only_layers", "decoder_sparse_step")

    def _validate(self):
        topk = self.norm_topk_prob
        super()._validate()
        self.norm_topk_prob = bool(topk)            # read here (Qwen3.5-MoE's class always renormalises)
        self.types = ["indexed_attention" if k == "full_attention" else k for k in self.types]
        if not isinstance(self.hc_count, int) or not 2 <= self.hc_count <= HC_MAX:
            raise ValueError(f"config: hc_count must be an integer in 2..{HC_MAX}, got {self.hc_count!r}")
        positive_int(self, "hc_lowrank")
        self.ple_layer_ids = sorted(set(self.ple_layer_ids or []))
        self.ple_embed_dim = self.ple_embed_dim or self.hidden_size
        eos = self.eos_token_id
        self.ple_eos = eos[0] if isinstance(eos, list) and eos else None if isinstance(eos, list) else eos
        if self.ple_layer_ids:
            ple.check(self)
        if (self.output_gate_type or self.hidden_act) != "silu":
            raise ValueError(f"config: qwen4_exp_text: output_gate_type {self.output_gate_type!r} is not supported "
                             "(the linear attention's gated norm is silu here)")
        if "indexed_attention" in self.types:
            missing = [k for k in QSA if getattr(self, k) is None]
            if missing:
                raise ValueError(f"config: qwen4_exp_text: attention layers need the QSA indexer's "
                                 f"{', '.join(missing)}")
            positive_int(self, *QSA)
            if self.indexer_budget % self.indexer_compress_ratio:
                raise ValueError("config: indexer_budget must be a multiple of indexer_compress_ratio")
            if self.indexer_kv_heads != 1:
                raise ValueError(f"config: qwen4_exp_text: indexer_kv_heads must be 1 (QSA's one key head), got "
                                 f"{self.indexer_kv_heads}")
            if not self.rotary_dim <= self.indexer_head_dim <= self.num_key_value_heads * self.head_dim:
                raise ValueError(f"config: indexer_head_dim {self.indexer_head_dim} must be at least the "
                                 f"{self.rotary_dim} rotated values (the indexer rotates as the heads do) and at most "
                                 f"num_key_value_heads x head_dim {self.num_key_value_heads * self.head_dim} "
                                 "(its keys' cache rows)")


class GatedResidual:
    """One gated residual's weights: the per-stream norm (1 + w, [n, D]), down [r, n D], up [n D, r], inject
    [n, n D] (None: the model's last mix), and the 1 / n scales of the low-rank and injection logits."""

    def __init__(self, t, p: str, cfg, inject: bool):
        n, D, r = cfg.hc_count, cfg.hidden_size, cfg.hc_lowrank
        self.norm = ple.grouped(t, p + "hc_norm", n, D, cfg.rms_norm_eps)
        self.ple = None                 # the layer's PLE, added to the streams before this mix (attention side)
        self.down = t.weight(p + "input_mix_weight_down.weight", (r, n * D))
        self.up = t.weight(p + "input_mix_weight_up.weight", (n * D, r))
        self.inject = t.weight(p + "block_inject_weight.weight", (n, n * D)) if inject else None
        self.inv_r, self.inv_n = Vec(np.full(r, 1.0 / n)), Vec(np.full(n, 1.0 / n))

    def matrices(self) -> list:
        return [w for w in (self.down, self.up, self.inject) if w is not None]

    def replace(self, new: dict) -> None:
        self.down, self.up = new.get(id(self.down), self.down), new.get(id(self.up), self.up)
        if self.inject is not None:
            self.inject = new.get(id(self.inject), self.inject)


@dataclass
class Qsa(BlockSparse):
    """An attention layer's QSA indexer, on MiniMax-M3's frame (its weights, norms, slot and the attention over the
    chosen blocks): iq = q_norm(wq x) [n_idx][dim] rotated as the layer's heads (their first rotary values, by
    halves), raw keys ik = wk x [dim] kept in cache slot `slot`; kernels/qsa.c chooses each query's top_k complete
    blocks (their mean key normed by k_norm, (1 + w) - 1 as the kernel adds the 1, and rotated at the block's start)
    and the incomplete last one, then MM3_ATTENTION attends over them. The layer's pre_store (the projections) and
    sparse (the rest); `local` unused (0)."""
    eps: float = 1e-6

    def buffers(self, cap: int) -> dict:
        if self._cap < cap:             # the arrays kept with their pointers
            self._bufs = scratch_arrays(cap, {"iq": self.n_idx * self.dim, "ik": self.dim},
                                        {"sel": self.top_k + 1, "n_sel": 1})
            self._cap = cap
        return {k: p for k, (_, p) in self._bufs.items()}

    def last_choice(self, T: int) -> np.ndarray:
        """The blocks the last step's T queries read, [T, top_k + 1], increasing, -1 after each one's count (a
        copy)."""
        if self._cap < T:
            raise ValueError(f"no choice of {T} tokens recorded")
        sel, n = self._bufs["sel"][0][:T], self._bufs["n_sel"][0][:T]
        return np.where(np.arange(self.top_k + 1) < n, sel, -1)

    def plan(self, plan, i: int, buf) -> None:
        b = self.buffers(plan.scratch.cap)
        plan.matmul(i, [self.wq, self.wk], buf["hx"], [b["iq"], b["ik"]])
        plan.norm(i, self.q_norm, b["iq"], self.n_idx, self.dim, b["iq"])

    def plan_attend(self, plan, i: int, q, att, H: int, KV: int, hd: int, scale: float) -> None:
        b = self.buffers(plan.scratch.cap)
        plan.rope(i, self.rope, b["iq"], ffi.NULL, self.n_idx, 0, self.dim)
        plan._add(lib.PT_OP_QSA_INDEX, i, x=b["iq"], x2=b["ik"], w=self.k_norm.p, eps=self.eps, cache_slot=self.slot,
                  n_heads=self.n_idx, head_dim=self.dim, x_stride=self.block, window=self.top_k,
                  rot_dim=self.rope.dim, sel=b["sel"], n_sel=b["n_sel"])
        plan._ops[-1]["slot"] = plan._slot(self.rope)
        plan.mm3_attention(i, q, H, KV, hd, scale, 1, self.block, self.top_k + 1, b["sel"], b["n_sel"], att)


class Qwen4ExpDecoder(PlanOracle, Decoder):
    """The Decoder's attention, DeltaNet and MoE ops inside the streams (HY-V4's frame: hy_v4_plan.plan_streams):
    X0 / X1 [T][n D] in turn, hn the normed streams, lo / g / post the gates' low rank, gates and injection logits
    (then weights), comb the identity, hx the block's input, y its output."""

    def __init__(self, arch, embed, layers, lm_head, *, n, hc, mixer):
        self.n, self.hc, self.mixer = n, hc, mixer      # before the Decoder's init (a test fault reads own_norms)
        super().__init__(arch, embed, layers, None, lm_head)
        D, r = arch.hidden_size, mixer.down.shape[0]
        self.extra = {"X0": n * D, "X1": n * D, "hn": n * D, "g": n * D, "lo": r, "post": n, "comb": n * n, "hx": D,
                      "y": D}
        if self._ples():                        # PLE's embedding, keys, value and normed streams
            self.extra.update(ple_e=self._ples()[0].width, ple_k=n * D, ple_v=D, ple_q=n * D)

    def _residuals(self) -> list:
        return [g for pair in self.hc for g in pair] + [self.mixer]

    def _ples(self) -> list:
        return [g.ple for g in self._residuals() if g.ple is not None]

    def matrices(self) -> list:
        return super().matrices() + [w for g in self._residuals() + self._ples() for w in g.matrices()]

    def own_norms(self) -> list:
        """The norms the Decoder's layers do not hold: the streams', the QSA indexers' query norms, PLE's."""
        return [g.norm for g in self._residuals()] + [L.sparse.q_norm for L in self.layers if L.sparse is not None] + \
            [m for p in self._ples() for m in p.norms()]

    def replace_matrices(self, new: dict) -> None:
        super().replace_matrices(new)
        for g in self._residuals() + self._ples():
            g.replace(new)

    def scratch(self, T: int):
        fresh = self._scratch is None or self._scratch.cap < T
        s = super().scratch(T)
        if fresh:                               # the stream mix is the identity at every token
            s.arrays["comb"][:] = np.eye(self.n, dtype=np.float32).ravel()
        return s

    def _mix(self, s: Plan, i, g: GatedResidual, X, out, b) -> None:
        n, D = self.n, self.arch.hidden_size
        if g.ple is not None:                   # PLE into the streams first
            g.ple.plan(s, i, X, b)
        s.norm(i, g.norm, X, n, D, b["hn"])
        s.matmul(i, [g.down] + ([g.inject] if g.inject is not None else []), b["hn"],
                 [b["lo"]] + ([b["post"]] if g.inject is not None else []))
        s.scale_cols(i, b["lo"], g.inv_r, g.down.shape[0])
        s.bias_act(i, b["lo"], None, g.down.shape[0], ACTIVATIONS["silu"])
        s.matmul(i, [g.up], b["lo"], [b["g"]])
        if g.inject is not None:
            s.scale_cols(i, b["post"], g.inv_n, n)
        s._add(lib.PT_OP_Q4X_MIX, i, x=b["hn"], x2=b["g"], y=[out, b["post"] if g.inject is not None else ffi.NULL,
                                                                  ffi.NULL], streams=n, width=D)

    def _build_plan(self, scratch) -> Plan:
        b, s, L = scratch.p, Plan(scratch), len(self.layers)
        last = plan_streams(self, s, scratch, lambda s, i, g, X: self._mix(s, i, g, X, b["hx"], b),
                            (self._mixer_block, self._moe_block))
        self._mix(s, L, self.mixer, b[last], b["resid"], b)
        s.head(L, None, b["resid"], self.arch.hidden_size, b["normed"], self.lm_head, None, 1.0, 0.0)
        return s.finish()

    def _mixer_block(self, s, i, L, b, scratch) -> None:
        if L.mamba is not None:
            s.mamba(i, L.mamba.c(scratch.cap), b["hx"], b["y"], slot=L.state_slot)
            return
        self._plan_attention(s, i, L, b["hx"], b)
        s.glu(i, GLU_ACTIVATIONS["sigmoid"], b["qgate"], b["att"], L.o.shape[1], b["att"])
        s.matmul(i, [L.o], b["att"], [b["y"]])

    def _moe_block(self, s, i, L, b, scratch) -> None:
        s.moe(i, L.moe.c(scratch.cap), b["hx"], b["y"])


def _qsa(cfg, t, p: str, slot: int, rope) -> Qsa:
    n, d, D, eps = cfg.indexer_n_heads, cfg.indexer_head_dim, cfg.hidden_size, cfg.rms_norm_eps
    return Qsa(t.weight(p + "index_q.weight", (n * d, D)), t.weight(p + "index_k.weight", (d, D)),
               norm(t, p + "q_layernorm", d, "rms", eps, add=1.0), Vec(t.array(p + "k_layernorm.weight", (d,))), n,
               d, cfg.indexer_compress_ratio, cfg.indexer_budget // cfg.indexer_compress_ratio, 0, slot, rope, eps)


def hf_tensors(cfg: Qwen4ExpTextConfig, ckpt) -> dict:
    """Qwen3.5-MoE's, and each indexer's index_qk_proj [(n_idx + 1) dim, hidden] as its query rows (`index_q`) and
    key rows (`index_k`)."""
    ple.check_buffers(cfg, ckpt)
    out = qwen3_5_moe_text.hf_tensors(cfg, ckpt)
    nd, d, D = (cfg.indexer_n_heads or 0) * (cfg.indexer_head_dim or 0), cfg.indexer_head_dim, cfg.hidden_size
    for i in range(cfg.num_hidden_layers):
        src = f"model.layers.{i}.self_attn.indexer.index_qk_proj.weight"
        if src in ckpt:
            for name, rows in (("index_q", (0, nd)), ("index_k", (nd, nd + d))):
                make = lambda s=src, r=rows: np.ascontiguousarray(ckpt.f32(s)[r[0]:r[1]])    # noqa: E731
                out[src.replace("index_qk_proj", name)] = ((rows[1] - rows[0], D), make, (src,))
    return out


def build(cfg: Qwen4ExpTextConfig, t) -> Qwen4ExpDecoder:
    D, hd, eps = cfg.hidden_size, cfg.head_dim, cfg.rms_norm_eps
    E, head = embed_and_head(t, cfg)
    rope = default_rope(cfg, dim=cfg.rotary_dim)
    layers, state_layers, hc, slots, n_layers = [], [], [], [], cfg.num_hidden_layers
    for i, kind in enumerate(cfg.types):
        p = f"model.layers.{i}."
        if kind == "linear_attention":
            mix = {"mamba": qwen3_next._deltanet(cfg, t, p + "linear_attn."), "q": None, "k": None, "v": None,
                   "o": None}
            state_layers.append(i)
        else:
            mix = qwen3_next.gated_attention(cfg, t, p, kind, rope)
        L = Layer(**mix, moe=moe_weights(t, p, cfg, n_experts=cfg.num_experts, top_k=cfg.num_experts_per_tok,
                                         inter=cfg.moe_intermediate_size, norm_topk=cfg.norm_topk_prob,
                                         router="mlp.gate", experts="mlp.experts", shared="mlp.shared_expert",
                                         shared_inter=cfg.shared_expert_intermediate_size,
                                         shared_gate="mlp.shared_expert_gate"))
        if kind != "linear_attention":
            L.q_norm, L.k_norm = (norm(t, p + f"self_attn.{x}_norm", hd, "rms", eps, add=1.0) for x in "qk")
            L.pre_store = L.sparse = _qsa(cfg, t, p + "self_attn.indexer.", n_layers + len(slots), rope)
            slots.append(i)
        layers.append(L)
        hc.append([GatedResidual(t, p + f"{w}_hyper_connection.", cfg, True) for w in ("attn", "mlp")])
    for j, i in enumerate(cfg.ple_layer_ids):   # PLE's state slots after the indexers'
        hc[i - 1][0].ple = ple.Ple(cfg, t, f"model.layers.{i - 1}.", j, n_layers + len(slots) + j)
        state_layers.append(n_layers + len(slots) + j)
    mamba = next((L.mamba for L in layers if L.mamba is not None), None)
    arch = Arch(vocab_size=cfg.vocab_size, hidden_size=D,
                intermediate_size=max(cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size),
                num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                head_dim=hd, context_length=rope.context_length,
                state_shapes=mamba.state_shapes if mamba else None, state_layers=tuple(state_layers),
                cache_slots=n_layers + len(slots) + len(cfg.ple_layer_ids) if slots or cfg.ple_layer_ids else None)
    return Qwen4ExpDecoder(arch, E, layers, head, n=cfg.hc_count, hc=hc,
                           mixer=GatedResidual(t, "model.hyper_connection_mixer.", cfg, False))


Config = Qwen4ExpTextConfig
UNREAD = ple.UNREAD
