"""The decoder every family runs: a stack of attention + MLP blocks described by plain data (`Arch`, `Layer`), over
weights prepared once. A family module maps its Hugging Face config and tensor names onto these pieces; this module
holds the only forward pass.

Per layer the pass is a handful of C calls: norm, q|k|v product (one call for the three), biases, q/k norms, RoPE +
cache store, attention (causal, optionally soft-capped and windowed), output product accumulated into the residual,
norm, gate|up product, gated activation, down product. What a family switches on adds a call, never a Python loop
over tokens or heads.

Those calls run in one of two ways. By default the decoder describes them once, at first use, as a plan of op
records (`_build_plan`, packed by petit/models/blocks/plan.py) and a step is one C call that runs them all
(kernels/plan.c); `forward(..., oracle=True)` makes them one by one from Python (`_forward_oracle`), the readable
reference the plan must match bit for bit (tests/test_plan.py).
"""
import threading
from dataclasses import dataclass

import numpy as np

from petit import testing_faults
from petit.models.blocks.block_sparse import BlockSparse
from petit.models.blocks.diff_attn import DiffAttn, Expand
from petit.models.blocks.dyn_mask import Compact, DynMask
from petit.models.blocks.mla import Mla
from petit.models.blocks.moe import Moe
from petit.models.blocks.norm_gate import NormGate
from petit.models.blocks.ssm import Mamba
from petit.models.blocks.plan import NORM_KINDS, Plan, fptr
from petit.models.blocks.rope import Rope
from petit.models.blocks.shared_block import SharedUse
from petit.native import ACTIVATIONS, GLU_ACTIVATIONS, Weight, attn_extra, ffi, lib


GATE_ACTS = {"sigmoid": 0, "softplus": 1}      # pt_head_gate's (issue 36, fam36g)


class Vec:
    """A float32 vector (or [rows, n] per-head block) the C calls read: a norm weight or a bias. Always a copy of
    its few KB: read from a mapped file at every step, it would keep the file's pages around it resident too (a
    read maps its neighbours' pages as well), which repacked matrices have let go."""

    def __init__(self, a: np.ndarray):
        self.a = np.array(a, np.float32, order="C")
        self.p = fptr(self.a)
        self.rows = self.a.shape[0] if self.a.ndim == 2 else 1


@dataclass
class Norm:
    """A normalisation: RMSNorm or LayerNorm, weight (None: ones), bias (None: zeros)."""
    kind: str
    eps: float
    w: Vec | None = None
    b: Vec | None = None
    gate: "NormGate | None" = None      # issue 36, fam36m: y *= sigmoid(up silu(down y)) after (A.X-K2's gated norm)

    def __call__(self, x, rows: int, D: int, y) -> int:
        rc = lib.pt_norm(NORM_KINDS[self.kind], x, self.w.p if self.w else ffi.NULL, self.b.p if self.b else ffi.NULL,
                         self.eps, rows, D, self.w.rows if self.w else 1, y)
        return rc | self.gate.run(y, rows, D) if self.gate is not None else rc


@dataclass
class HeadDense:
    """issue 36, fam36j: what the final-normed states go through before the LM head, norm(act(W x + b)) (ModernBERT's
    prediction head: dense, GELU, LayerNorm). It runs over every position of a step (the per-position rows of the
    plan's ops), then the LM head reads its rows as it reads the final norm's. `name`: W's tensor in the file (what
    `petit verify` pairs it with)."""
    W: Weight
    b: "Vec | None"
    act: str
    norm: Norm
    name: str = ""


@dataclass
class Layer:
    """One block. Norms left None are absent (e.g. OLMo 2 has no pre-norms, only post-norms)."""
    q: Weight | None                    # None only with mla
    k: Weight | None
    v: Weight | None
    o: Weight
    down: Weight | None = None          # None only with moe (down_b with moe: added once after the experts, JetMoE)
    up: Weight | None = None
    gate: Weight | None = None          # None: a plain MLP act(up(x) + b) -> down
    moe: "Moe | None" = None            # routed experts in place of the MLP (petit/models/blocks/moe.py)
    attn_norm: Norm | None = None
    mlp_norm: Norm | None = None        # in a parallel block with one shared norm: None
    post_attn_norm: Norm | None = None  # applied to the attention output before the residual add (Gemma 2/3, OLMo 2)
    post_mlp_norm: Norm | None = None
    q_norm: Norm | None = None
    k_norm: Norm | None = None
    q_b: Vec | None = None
    k_b: Vec | None = None
    v_b: Vec | None = None
    o_b: Vec | None = None
    gate_b: Vec | None = None
    up_b: Vec | None = None
    down_b: Vec | None = None
    rope: Rope | None = None            # None: no position rotation in this layer (NoPE)
    window: int = 0                     # sliding-window size; 0: full causal attention
    sinks: Vec | None = None            # [n_heads] attention-sink logits (gpt-oss), None: none
    chunk: int = 0                      # > 0: chunked attention, a query sees its own chunk only (Llama 4)
    temperature: tuple | None = None    # (floor_scale, attn_scale): Llama 4's temperature-tuned NoPE queries;
    # (floor, scale, 1): Ministral 3's llama_4_scaling_beta, floor(p / floor) (the wrap group); (floor, a, 2): Beam's
    # scalable softmax, x (1 + (p + 1) / floor) ** a (issue 36, fam36i)
    alibi: Vec | None = None            # [n_heads] ALiBi slopes (BLOOM, MPT, Falcon): linear position biases
    norm_after_rope: bool = False       # q/k norms applied to the rotated q and k (Hunyuan), not before RoPE
    attn_gate: Weight | None = None     # the heads' outputs times sigmoid(attn_gate x) before o_proj (Qwen3-Next)
    attn_gate_b: Vec | None = None      # issue 36, fam36i: a bias of attn_gate x (Beam's gate_bias, one a head)
    o_norm: Norm | None = None          # a norm of o_proj's input, the heads' outputs (BitNet's attn_sub_norm)
    down_norm: Norm | None = None       # a norm of down_proj's input (BitNet's ffn_sub_norm)
    clip: float = 0.0                   # > 0: q, k and v clamped to [-clip, clip] after their biases (OLMo's clip_qkv)
    mlp_act: tuple | None = None        # (kind, params): a plain MLP's activation with parameters (pt_param_act), in
                                        # place of arch.act (Apertus's xIELU)
    resid_attn_norm: Norm | None = None     # post-LN: the residual stream normed after the attention's add (OPT 350m)
    resid_mlp_norm: Norm | None = None      # and after the MLP's
    mla: Mla | None = None              # multi-head latent attention in place of q / k / v (petit/models/blocks/mla.py)
    mamba: Mamba | None = None          # a Mamba mixer in place of attention and MLP (petit/models/blocks/ssm.py);
                                        # beside attention when the layer has both (Falcon-H1)
    state_slot: int | None = None       # the mixer's cache slot, when not the layer's index (Falcon-H1)
    # issue 30, the hybrid group: Zamba's shared transformer block, run before this layer's mixer on the residual
    # stream beside the original embeddings; its output (through the use's own linear) is added to the mixer's input
    shared: SharedUse | None = None
    # issue 30, the hybrid group: MiniMax's DeepNorm, resid = alpha resid + the sublayer's output (attention or mixer,
    # then the MLP): (alpha of the first, alpha of the second); issue 36, fam36d: either may be a Vec [hidden], one
    # alpha per channel (SmallDoge's input_residual, post_attention_residual)
    resid_alpha: tuple = (1.0, 1.0)
    # issue 36, fam36d: what a family does to q / k / v after their norms, before RoPE and the cache store
    # (run(buf, T) -> rc; plan(plan, i, buf)): SmallDoge's key bias slots (petit/models/blocks/dyn_mask.py), DiffLlama's
    # heads made twice (petit/models/blocks/diff_attn.py)
    pre_store: "DynMask | Expand | None" = None
    # issue 30, the moe_b group: a norm of a mixer's output before its residual add (LFM3's post_operator_norm)
    mixer_norm: Norm | None = None
    # issue 30, the jetmoe group: JetMoE's mixture of attention heads. q holds every attention expert's query heads
    # (head h * E + e: expert e's head h, reading kv head h) and o every expert's output columns; each token's heads
    # are weighed by the softmax of its top moa_top_k logits of this router [E, D] (float), 0 for the other experts
    # (kernels/moa.c), so o sums the chosen experts' outputs only
    moa_router: Weight | None = None
    moa_top_k: int = 0
    # issue 30, the longcat group: LongCat-Flash's shortcut MoE. With moe_shortcut, `moe` runs on the MLP's input
    # beside the dense MLP (gate / up / down) into buf["stash"] instead of the residual; a layer with add_shortcut
    # adds buf["stash"] to the residual after its own MLP
    moe_shortcut: bool = False
    add_shortcut: bool = False
    # issue 35: an encoder's attention (BERT): every token sees every position of its sequence, not only those before
    bidirectional: bool = False
    # issue 33: LoRA adapters applied at run time, target ("q", "k", "v", "o", "gate", "up", "down") -> (A [r, in],
    # B [out, r] times the adapter's scale), float32 Weights: the target's product gains B (A x) (petit/loading/lora.py)
    lora: dict | None = None
    # issue 36, fam36d: what turns the attention's output into o_proj's input (run(att, T, buf) -> (rc, o's input);
    # plan(plan, i, att, buf) -> o's input): DiffLlama's pairs (petit/models/blocks/diff_attn.py), SmallDoge's heads
    # without their extra values (petit/models/blocks/dyn_mask.py)
    att_out: "DiffAttn | Compact | None" = None
    # issue 36, fam36d: {role: (rows, cols)} of the checkpoint's matrix this layer's q / k / v hold (None: all; an index
    # past the last: a zero row), when the family rearranged them (what `petit verify` compares)
    file_rows: dict | None = None
    # issue 36, fam36i: MiniMax-M3's block-sparse attention in place of the layer's attention kernel, after its
    # rope_store (petit/models/blocks/block_sparse.py; its projections run as the layer's pre_store)
    sparse: "BlockSparse | None" = None
    # issue 36, fam36h: what a family does to the residual stream at the block's start, before its attention (run(buf,
    # T) -> rc; plan(plan, i, buf)): Dory's nGPT input norm in place and its loops' entries
    # (petit/models/families/dense/dory.py)
    pre_block: "object | None" = None
    # issue 36, fam36h: (gate, up) Vecs [intermediate]: the gated MLP's two products times these per column, after
    # their biases, before the activation (Dory's suv_gate / suv_up)
    glu_scales: tuple | None = None
    # issue 36, fam36g: this layer's query heads when not arch.num_attention_heads (Laguna's per-layer head counts; the
    # arch holds the most, which the scratch is sized for)
    heads: int = 0
    # issue 36, fam36g: attn_gate's activation and the values each gate scales: sigmoid of each value (Qwen3-Next,
    # the default), or softplus of one a head (attn_gate_width head_dim) or of each value (Laguna)
    attn_gate_act: str = "sigmoid"
    attn_gate_width: int = 1
    # issue 36, fam36g: what a family does to the raw q / k / v (after their biases, before the norms), per sequence
    # with a state in its cache (run(i, buf, runs, T) -> rc; plan(plan, i, buf)): ZAYA's CCA
    # (petit/models/families/moe/cca.py)
    mix_qkv: object = None
    # issue 36, fam36g: what writes the experts' router logits before `moe` runs on them (Moe.ext_logits; run(x, T,
    # buf, cap) -> rc; plan(plan, i, x, buf)): ZAYA's router MLP (petit/models/families/moe/cca.py)
    pre_moe: object = None

    def param_ptr(self, what: str):
        """The float[4] parameters of the clamp (`clip`) or of mlp_act, made once."""
        key = "_p_" + what
        if not hasattr(self, key):
            vals = [-self.clip, self.clip] if what == "clip" else list(self.mlp_act[1])
            setattr(self, key, ffi.new("float[4]", vals + [0.0] * (4 - len(vals))))
        return getattr(self, key)

    def moa_logits(self, cap: int):
        """JetMoE's attention router logits [cap, E] of the last step, kept per layer (grown with the scratch; the
        smaller ones stay alive for the plans that point at them): what moa_last_routing reads (jetmoe group)."""
        a = getattr(self, "_moa", None)
        if a is None or a.shape[0] < cap:
            self._moa_old = getattr(self, "_moa_old", []) + ([a] if a is not None else [])
            a = self._moa = np.zeros((cap, self.moa_router.shape[0]), np.float32)
        return fptr(a)

    def moa_last_routing(self, T: int) -> np.ndarray:
        """The attention experts the last step chose for its T tokens, [T, top_k] sorted per row (kernels/moa.c's
        choice: the largest logits, ties to the lower expert)."""
        lg = self._moa[:T]
        return np.sort(np.argsort(-lg, axis=1, kind="stable")[:, :self.moa_top_k], axis=1)

    def attn_extra(self):
        """The pt_attn_extra of this layer's sinks, chunk, temperature and ALiBi slopes (NULL when it has none),
        made once."""
        if not hasattr(self, "_extra"):
            self._extra = attn_extra(self.sinks.p if self.sinks is not None else None, self.chunk, self.temperature,
                                     self.alibi.p if self.alibi is not None else None, self.bidirectional)
        return self._extra


@dataclass
class Arch:
    """What is the same in every layer."""
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    context_length: int
    act: str = "silu"                   # the MLP activation (gated: act(gate) * up)
    parallel: bool = False              # x + attn(n1(x)) + mlp(n2(x)) instead of two sequential residual steps
    qk_norm_per_head: bool = True       # q/k norms over each head (Qwen 3, Gemma 3) or over the whole row (OLMo 2)
    attn_scale: float | None = None     # None: head_dim ** -0.5
    attn_softcap: float = 0.0
    residual_scale: float = 1.0         # Granite's residual_multiplier
    embed_scale: float = 1.0            # Gemma's sqrt(hidden_size), Granite's embedding_multiplier
    logit_scale: float = 1.0            # Cohere's logit_scale, 1 / Granite's logits_scaling
    logit_softcap: float = 0.0
    values_are_keys: bool = False       # the KV cache holds one row a position (latent attention)
    state_shapes: tuple | None = None   # (conv, ssm) state shapes of a state-space model's layers: a StateCache
    state_layers: tuple | None = None   # a hybrid's layers with a recurrent state (the others attention): HybridCache
    empty_layers: tuple = ()            # a hybrid's blocks with neither state nor KV rows (Nemotron-H's MLP blocks)
    cache_slots: int | None = None      # a HybridCache's slots, when not one a layer (Falcon-H1: KV 0..n-1, states
                                        # n..); issue 36, fam36i: a KV cache's (MiniMax-M3's indexer keys after the
                                        # layers')
    shared_rank: int = -1               # issue 30, the hybrid group: >= 0 when layers use Zamba's shared blocks (the
                                        # adapters' rank, 0 without): the scratch gets their buffers
    shortcut: bool = False              # issue 30, the longcat group: layers hold a shortcut MoE (Layer.moe_shortcut):
                                        # the scratch gets buf["stash"] [T, D], its output until it is added
    lora_rank: int = 0                  # issue 33: the largest rank of the layers' run-time adapters (Layer.lora):
                                        # the scratch gets buf["lora_x"] [T, rank], A x before B multiplies it


class _Scratch:
    """The activation buffers of one forward pass over up to `cap` tokens (T <= cap of them in use), float32,
    row-major, one row per token; `arrays[name]` holds each, `p[name]` its C pointer. With D = hidden_size,
    F = intermediate_size, H / KV = attention / key-value heads and hd = head_dim:

        name        shape            holds
        resid       [T, D]           the residual stream: the embeddings, then each block adds its sublayers' outputs
        normed      [T, D]           the normed input of the current sublayer (attn_norm; mlp_norm in a sequential
                                     block), and at the end the final norm of the positions the head reads
        normed_mlp  [T, D]           a parallel block's separate MLP norm of the block input (attention uses normed)
        branch      [T, D]           a sublayer's output projection, when a post-norm or residual_scale must act on
                                     it before it is added to resid (otherwise the product adds into resid directly)
        q           [T, H * hd]      the queries, each head's hd values side by side (bias, q norm, RoPE in place)
        k, v        [T, KV * hd]     this pass's keys and values (biases, k norm); RoPE rotates each key as it is
                                     copied into the KV cache, which holds every position's
        att         [T, H * hd]      the attention output of every head, side by side: the input of o_proj
        gate, up    [T, F]           the gated MLP's two projections (a plain MLP's up goes to mlp_hidden)
        mlp_hidden  [T, F]           act(gate) * up, or act(up + bias) in a plain MLP: the input of down_proj; the
                                     same memory as `up` (the activation is elementwise, written over it: a 7B
                                     prefill of 512 tokens holds 37 MiB less)

    plus `ids` [cap] int32, the token ids being embedded, and `extra` {name: width}: buffers [cap, width] a family's
    own ops use (Decoder.extra: Inkling's relative states, HRM-Text's two states).
    """

    def __init__(self, arch: Arch, cap: int, extra: dict | None = None):
        D, F = arch.hidden_size, arch.intermediate_size
        q, kv = arch.num_attention_heads * arch.head_dim, arch.num_key_value_heads * arch.head_dim
        self.cap = cap
        self.ids = np.zeros(cap, np.int32)
        self.ids_p = ffi.cast("int32_t *", ffi.from_buffer(self.ids))
        widths = {"resid": D, "normed": D, "normed_mlp": D, "branch": D, "q": q, "k": kv, "v": kv, "att": q, "qgate": q,
                  "gate": F, "up": F, "mlp_hidden": F}
        if arch.shared_rank >= 0:          # Zamba's shared blocks: the embeddings, [resid | embeddings], an adapter's
            widths.update(orig=D, cat=2 * D, lora=max(arch.shared_rank, 1), shared=D)     # rank, the block's output
        if arch.shortcut:                  # LongCat-Flash's shortcut MoE output, held until the next layer's end
            widths["stash"] = D
        if arch.lora_rank:                 # issue 33: a run-time adapter's A x
            widths["lora_x"] = arch.lora_rank
        self.arrays = {name: np.zeros((cap, w), np.float32) for name, w in widths.items() if name != "mlp_hidden"}
        self.arrays["mlp_hidden"] = self.arrays["up"]
        self.arrays.update((name, np.zeros((cap, max(w, 1)), np.float32)) for name, w in (extra or {}).items())
        self.p = {name: fptr(buf) for name, buf in self.arrays.items()}


_MATRICES = ("q", "k", "v", "o", "gate", "up", "down", "attn_gate")     # a Layer's weight matrices


class Decoder:
    """The forward pass.

    Args:
        arch: the sizes and the switches.
        embed: the token embedding [vocab, hidden].
        layers: the blocks.
        final_norm: the norm before the LM head (None: none, OPT-350m's post-LN).
        lm_head: the output matrix (the embedding when tied); lm_head_b an optional bias.
        pos_embed: learned absolute positions [n_pos, hidden] (GPT-2), float32, or None.
        embed_norm: a norm of the embeddings (with the positions) before the first block (BLOOM), or None.
        head_dense: a transform between the final norm and the LM head (HeadDense: ModernBERT's), or None.

    The plan is built from these at the first forward and keeps pointers into them: code that swaps a layer's
    pieces afterwards sets `_plan = None` so the next step describes the model again.

    `offload` (None: the CPU alone) runs the plan's matmuls on an OpenCL device (petit.gpu.attach sets it).
    """

    offload = None
    # issue 36, fam36h: each vocabulary column's logit times this [vocab] Vec, after the head's bias, scale and
    # soft-cap (Dory's logit_scale); None: none
    logit_cols = None
    # {name: width} of scratch buffers beyond _Scratch's that a family's own ops read and write (set on the instance)
    extra: dict = {}

    def __init__(self, arch: Arch, embed: Weight, layers: list[Layer], final_norm: Norm, lm_head: Weight,
                 lm_head_b: Vec | None = None, pos_embed: np.ndarray | None = None, embed_norm: Norm | None = None,
                 head_dense: HeadDense | None = None):
        self.arch, self.embed, self.layers, self.final_norm = arch, embed, layers, final_norm
        self.embed_norm, self.head_dense = embed_norm, head_dense
        self.lm_head, self.lm_head_b, self.pos_embed = lm_head, lm_head_b, pos_embed
        self._scratch = None
        self._plan = None                 # the forward plan over the current scratch, built at first use
        self._lock = threading.Lock()     # one forward pass at a time: the scratch buffers are shared
        testing_faults.apply(self)        # TEST-ONLY: a no-op unless PETIT_TEST_FAULT is set (petit/testing_faults.py)

    @property
    def weight_type(self) -> str:
        """The type of most of the layers' weights (a recipe such as q4_k_m mixes two)."""
        sizes: dict[str, int] = {}
        for L in self.layers:
            for W in [getattr(L, n) for n in _MATRICES] + (L.moe.matrices() if L.moe else []):
                if W is not None:
                    sizes[W.dtype] = sizes.get(W.dtype, 0) + W.shape[0] * W.shape[1]
        return max(sizes, key=sizes.get) if sizes else self.embed.dtype

    def matrices(self) -> list[Weight]:
        """The weights the pass multiplies by (each once; the embedding only when it is the tied LM head, an embedding
        alone is only looked up)."""
        out = {id(W): W for L in self.layers for W in (getattr(L, n) for n in _MATRICES) if W is not None}
        out.update((id(W), W) for L in self.layers if L.moe for W in L.moe.matrices())
        out.update((id(W), W) for L in self.layers if L.mla for W in L.mla.matrices())
        out.update((id(W), W) for L in self.layers if L.sparse for W in L.sparse.matrices())
        out.update((id(W), W) for L in self.layers if L.mamba for W in L.mamba.matrices())
        out.update((id(W), W) for L in self.layers if L.shared for W in L.shared.matrices())
        if self.head_dense is not None:
            out[id(self.head_dense.W)] = self.head_dense.W
        out[id(self.lm_head)] = self.lm_head
        return list(out.values())

    def replace_matrices(self, new: dict) -> None:
        """Swap weights the pass multiplies by: `new` maps id(old Weight) -> its replacement (the same values in
        another layout). The plan is described again at the next step."""
        for L in self.layers:
            for n in _MATRICES:
                W = getattr(L, n)
                if W is not None and id(W) in new:
                    setattr(L, n, new[id(W)])
            if L.moe is not None:
                L.moe.replace(new)
            if L.mla is not None:
                L.mla.replace(new)
            if L.sparse is not None:
                L.sparse.replace(new)
            if L.mamba is not None:
                L.mamba.replace(new)
            if L.shared is not None:
                L.shared.replace(new)
        if id(self.embed) in new:
            self.embed = new[id(self.embed)]
        self.lm_head = new.get(id(self.lm_head), self.lm_head)
        if self.head_dense is not None:
            self.head_dense.W = new.get(id(self.head_dense.W), self.head_dense.W)
        self._plan = None

    def step_plan(self):
        """This model's forward plan (a Plan; described here if no step has run yet)."""
        with self._lock:
            if self._plan is None:
                self._plan = self._build_plan(self.scratch(1))
            return self._plan

    def plan_kinds(self) -> set[int]:
        """The op kinds (PT_OP_*) of this model's forward plan."""
        plan = self.step_plan()
        return {plan.ops[i].kind for i in range(plan.n_ops)}

    def scratch(self, T: int) -> _Scratch:
        if self._scratch is None or self._scratch.cap < T:
            self._scratch = _Scratch(self.arch, max(T, 16), self.extra)
        return self._scratch

    def forward(self, ids, cache, logits_out: np.ndarray | None = None, oracle: bool = False) -> None:
        """Run tokens `ids` at positions cache.pos .. cache.pos+T-1, append them to the cache, and write the logits
        of the last logits_out.shape[0] positions into logits_out (or skip the head when it is None). One C call
        runs the step; oracle=True runs it op by op from Python instead (the reference; same results, slower).
        This is `forward_batch` with one sequence."""
        n = 0 if logits_out is None else logits_out.shape[0]
        self.forward_batch([(ids, cache, n)], logits_out if n else None, oracle)

    def forward_batch(self, seqs: list, logits_out: np.ndarray | None = None, oracle: bool = False) -> None:
        """Run several independent sequences in one step. `seqs` holds each one's (ids, cache, n_logits): its
        tokens run at positions cache.pos .. cache.pos+T-1 of its own cache, and the logits of its last n_logits
        positions go to logits_out after those of the sequences before it (logits_out [sum of n_logits, vocab], or
        None when that sum is 0). The matmuls read each weight once for all the sequences' tokens; each sequence's
        logits and cache come out bit for bit as if it had run alone. An error names the sequence when there are
        several, and leaves every cache as it was."""
        with self._lock:
            if oracle:
                self._forward_oracle(seqs, logits_out)
            else:
                self._forward(seqs, logits_out)

    def hidden_batch(self, seqs: list) -> np.ndarray:
        """Run sequences (ids, cache) as `forward_batch` does, without the head, and return every position's last
        hidden state after the final norm (when the model has one), the sequences' rows one after another:
        [sum of T, hidden_size] float32 (issue 35: what an embedding model pools)."""
        D = self.arch.hidden_size
        with self._lock:
            self._forward([(ids, cache, 0) for ids, cache in seqs], None)
            T = sum(len(ids) for ids, _ in seqs)
            resid = self._scratch.arrays["resid"][:T]
            if self.final_norm is None:
                return resid.copy()
            out = np.empty((T, D), np.float32)
            if self.final_norm(fptr(resid), T, D, fptr(out)):
                raise RuntimeError("kernel error in the final norm")
            return out

    def _begin(self, seqs, logits_out) -> tuple[list, int, _Scratch]:
        """Check each cache against the model and the room left in it; put the ids into the scratch, one sequence
        after another: ([(T, pos0, cache, n_logits)], total T, scratch)."""
        arch = self.arch
        KV, hd = arch.num_key_value_heads, arch.head_dim
        runs, owner, total, n_out = [], {}, 0, 0
        for i, (ids, cache, n) in enumerate(seqs):
            where = self._seq(seqs, i)
            if arch.state_layers is not None:
                layout = ("hybrid", arch.cache_slots or len(self.layers), tuple(arch.state_layers),
                          tuple(arch.state_shapes[0]), tuple(arch.state_shapes[1]), KV, hd) + \
                    ((tuple(arch.empty_layers),) if arch.empty_layers else ())
                if cache.layout != layout or cache.n_ctx > arch.context_length:
                    raise ValueError(f"{where}this cache {cache.layout} was not made for this model (needs "
                                     f"{layout}): use model.new_cache()")
            elif arch.state_shapes is not None:
                layout = ("state", len(self.layers)) + tuple(arch.state_shapes)
                if cache.layout != layout or cache.n_ctx > arch.context_length:
                    raise ValueError(f"{where}this cache {cache.layout} was not made for this model (needs the "
                                     f"recurrent state {layout}): use model.new_cache()")
            else:
                layout = (arch.cache_slots or len(self.layers), KV, cache.n_ctx, hd)
                if cache.layout != layout or cache.n_ctx > arch.context_length:
                    raise ValueError(f"{where}this KV cache {cache.layout} was not made for this model (needs "
                                     f"{layout[:2]} + (n_ctx <= {arch.context_length}, {hd})): use model.new_cache()")
            if id(cache) in owner:
                raise ValueError(f"sequence {i} uses the KV cache of sequence {owner[id(cache)]}: each sequence "
                                 f"needs its own")
            owner[id(cache)] = i
            T, pos0 = len(ids), cache.pos
            if T < 1 or not 0 <= n <= T:
                raise ValueError(f"{where}{T} token(s) cannot give {n} logit row(s): a sequence runs at least one "
                                 f"token and scores at most its last T positions")
            if pos0 + T > cache.n_ctx:
                raise ValueError(f"{where}context full: {pos0} + {T} tokens exceed the cache size {cache.n_ctx}")
            runs.append((T, pos0, cache, n))
            total += T
            n_out += n
        if (n_out == 0) != (logits_out is None) or (logits_out is not None and logits_out.shape[0] != n_out):
            got = None if logits_out is None else logits_out.shape
            raise ValueError(f"the sequences ask for {n_out} logit rows but logits_out is {got}")
        scratch = self.scratch(total)
        at = 0
        for (ids, _, _), (T, _, _, _) in zip(seqs, runs):
            scratch.ids[at:at + T] = ids
            at += T
        return runs, total, scratch

    @staticmethod
    def _seq(seqs, i: int) -> str:
        """What names sequence i in an error: nothing when it runs alone."""
        return f"sequence {i}: " if len(seqs) > 1 else ""

    def _bad_ids(self, seqs) -> ValueError:
        for i, (ids, _, _) in enumerate(seqs):
            bad = [int(t) for t in ids if not 0 <= t < self.arch.vocab_size]
            if bad:
                return ValueError(f"{self._seq(seqs, i)}token id(s) {bad[:5]} out of range for a vocabulary of "
                                  f"{self.arch.vocab_size}")
        return ValueError("a token id out of range")     # not reached: the embedding found one

    @staticmethod
    def _positions(runs, seq: int) -> str:
        """The positions an error names: the failing sequence's (when the op ran per sequence), else all of them."""
        if len(runs) == 1:
            seq = 0
        if seq < 0:
            return f"sequences 0..{len(runs) - 1}"
        T, pos0 = runs[seq][:2]
        return ("" if len(runs) == 1 else f"sequence {seq}, ") + f"positions {pos0}..{pos0 + T - 1}"

    def _forward(self, seqs, logits_out) -> None:
        """The step as one C call over the plan (built, or rebuilt when the scratch grew, here)."""
        runs, _, scratch = self._begin(seqs, logits_out)
        if self._plan is None or self._plan.scratch is not scratch:
            self._plan = self._build_plan(scratch)
        rc = self._plan.run(runs, logits_out, self.offload)
        if rc:
            kind, layer, seq = self._plan.failed()
            if kind == "embed" and rc == -1:
                raise self._bad_ids(seqs)
            if layer == len(self.layers):    # the blocks ran: their positions are in the caches, as in the oracle
                for T, pos0, cache, _ in runs:
                    cache.pos = pos0 + T
                raise RuntimeError("kernel error in the final norm or the LM head")
            where = f"layer {layer}" if layer >= 0 else f"the {kind}"
            raise RuntimeError(f"kernel error {rc} in {where} ({self._positions(runs, seq)})")
        for T, pos0, cache, _ in runs:
            cache.pos = pos0 + T
        if self.logit_cols is not None and logits_out is not None:
            logits_out *= self.logit_cols.a

    def _attn_scale(self) -> float:
        a = self.arch
        return a.attn_scale if a.attn_scale is not None else a.head_dim ** -0.5

    def _forward_oracle(self, seqs, logits_out) -> None:
        """The step op by op from Python: the reference the plan matches. The sequences' tokens are stacked as in
        the plan; the ops that read positions or a cache loop over the sequences."""
        arch = self.arch
        D, F = arch.hidden_size, arch.intermediate_size
        runs, T, scratch = self._begin(seqs, logits_out)
        buf = scratch.p                      # the buffers' C pointers, by name (the table in _Scratch)
        if lib.pt_get_rows(self.embed.c, scratch.ids_p, T, buf["resid"]) != 0:
            raise self._bad_ids(seqs)
        resid = scratch.arrays["resid"]
        if arch.embed_scale != 1.0:
            resid[:T] *= np.float32(arch.embed_scale)
        if self.pos_embed is not None:
            at = 0
            for n, pos0, _, _ in runs:
                resid[at:at + n] += self.pos_embed[pos0:pos0 + n]
                at += n
        if self.embed_norm is not None and self.embed_norm(buf["resid"], T, arch.hidden_size, buf["resid"]):
            raise RuntimeError("kernel error in the embedding norm")
        if arch.shared_rank >= 0:            # Zamba: the shared blocks read the embeddings beside the residual stream
            scratch.arrays["orig"][:T] = resid[:T]
        tables = {}                          # one RoPE table per distinct Rope object and sequence, for this pass
        scale = self._attn_scale()
        rc = 0                               # the C calls return 0, or < 0 on a bad argument; checked once per layer
        for i, layer in enumerate(self.layers):
            if layer.pre_block is not None:    # Dory (fam36h): the stream normed in place, a loop's entry
                rc |= layer.pre_block.run(buf, T)
            # attention input: the pre-norm (or the residual itself when the layer has none)
            attn_in = buf["resid"]
            if layer.shared is not None:       # Zamba: the mixer reads norm(resid + the shared block's output)
                rc |= self._shared(i, layer, runs, T, scratch, tables)
                rc |= layer.attn_norm(buf["shared"], T, D, buf["normed"])
                attn_in = buf["normed"]
            elif layer.attn_norm is not None:
                rc |= layer.attn_norm(buf["resid"], T, D, buf["normed"])
                attn_in = buf["normed"]
            if layer.mamba is not None:         # the mixer, per sequence (its recurrent state), added to resid
                at = 0
                direct = arch.residual_scale == 1.0 and layer.resid_alpha[0] == 1.0 and layer.mixer_norm is None
                slot = i if layer.state_slot is None else layer.state_slot
                for n, _, cache, _ in runs:
                    rc |= layer.mamba.run(attn_in + at * D, n, cache.k_ptr[slot], cache.v_ptr[slot],
                                          (buf["resid"] if direct else buf["branch"]) + at * D, direct)
                    at += n
                if not direct:                  # Granite's residual_multiplier, MiniMax's alpha, LFM3's mixer norm
                    if layer.mixer_norm is not None:
                        rc |= layer.mixer_norm(buf["branch"], T, D, buf["branch"])
                    if layer.resid_alpha[0] != 1.0:
                        lib.pt_axpy(buf["resid"], layer.resid_alpha[0] - 1.0, buf["resid"], T * D)
                    lib.pt_axpy(buf["resid"], arch.residual_scale, buf["branch"], T * D)
                if rc:
                    raise RuntimeError(f"kernel error {rc} in layer {i} ({self._positions(runs, -1)})")
                if layer.down is None and layer.moe is None:    # a Mamba block: the mixer only
                    continue
                seq = -1
            mlp_in = None
            if arch.parallel:                # both branches read the block's input
                if layer.mlp_norm is not None:
                    rc |= layer.mlp_norm(buf["resid"], T, D, buf["normed_mlp"])
                    mlp_in = buf["normed_mlp"]
                else:
                    mlp_in = attn_in
            if layer.o is None:
                pass                            # its mixer ran above, no attention (LFM2's short conv): the MLP follows
            elif layer.mla is not None:
                attn_rc, seq, att = self._mla(i, layer, attn_in, runs, T, scratch, tables, scale)
                rc |= attn_rc
                self._alpha(layer.resid_alpha[0], T, scratch)
                rc |= self._residual(layer.o, layer.o_b, layer.post_attn_norm, att, T, scratch, layer, "o")
            else:
                (attn_rc, seq), att = self._attention(i, layer, attn_in, runs, T, scratch, tables, scale), buf["att"]
                rc |= attn_rc
                if layer.att_out is not None:           # DiffLlama, SmallDoge (fam36d): o_proj's input
                    out_rc, att = layer.att_out.run(att, T, buf)
                    rc |= out_rc
                if layer.moa_router is not None:        # JetMoE: the attention experts weighed (jetmoe group)
                    logits = layer.moa_logits(scratch.cap)
                    rc |= lib.pt_matmul(layer.moa_router.c, attn_in, T, logits, 0)
                    rc |= lib.pt_moa_gate(logits, T, layer.moa_router.shape[0], layer.moa_top_k,
                                          arch.num_key_value_heads, arch.head_dim, att)
                if layer.attn_gate is not None:
                    rc |= self._gate(layer, att, T, buf)
                if layer.o_norm is not None:
                    rc |= layer.o_norm(att, T, layer.o.shape[1], att)
                self._alpha(layer.resid_alpha[0], T, scratch)
                rc |= self._residual(layer.o, layer.o_b, layer.post_attn_norm, att, T, scratch, layer, "o")
            if layer.resid_attn_norm is not None:
                rc |= layer.resid_attn_norm(buf["resid"], T, D, buf["resid"])
            if layer.down is None and layer.moe is None:        # an attention block without an MLP (Nemotron-H)
                if rc:
                    raise RuntimeError(f"kernel error {rc} in layer {i} ({self._positions(runs, seq)})")
                continue
            if mlp_in is None:               # sequential: the MLP reads the residual after the attention's add
                mlp_in = buf["resid"]
                if layer.mlp_norm is not None:
                    rc |= layer.mlp_norm(buf["resid"], T, D, buf["normed"])
                    mlp_in = buf["normed"]
            if layer.moe_shortcut:             # LongCat-Flash: the MoE beside the dense MLP, held (longcat group)
                rc |= layer.moe.run(mlp_in, T, buf["stash"])
            if layer.pre_moe is not None:      # ZAYA's router MLP (fam36g): the experts' logits
                rc |= layer.pre_moe.run(mlp_in, T, buf, scratch.cap)
            if layer.moe is not None and not layer.moe_shortcut:
                rc |= layer.moe.run(mlp_in, T, buf["branch"])
                if layer.down_b is not None:            # an output bias after the experts (JetMoE, jetmoe group)
                    rc |= lib.pt_bias_act(buf["branch"], layer.down_b.p, T, D, 0)
                self._alpha(layer.resid_alpha[1], T, scratch)
                rc |= self._add_branch(layer.post_mlp_norm, T, scratch)
            else:
                rc |= self._mlp(layer, mlp_in, T, F, scratch)
                if layer.down_norm is not None:
                    rc |= layer.down_norm(buf["mlp_hidden"], T, F, buf["mlp_hidden"])
                self._alpha(layer.resid_alpha[1], T, scratch)
                rc |= self._residual(layer.down, layer.down_b, layer.post_mlp_norm, buf["mlp_hidden"], T, scratch,
                                     layer, "down")
            if layer.add_shortcut:             # LongCat-Flash: the previous layer's shortcut MoE output
                lib.pt_axpy(buf["resid"], 1.0, buf["stash"], T * D)
            if layer.resid_mlp_norm is not None:
                rc |= layer.resid_mlp_norm(buf["resid"], T, D, buf["resid"])
            if rc:
                raise RuntimeError(f"kernel error {rc} in layer {i} ({self._positions(runs, seq)})")
        for n, pos0, cache, _ in runs:
            cache.pos = pos0 + n
        if logits_out is not None:
            self._head(buf, runs, D, logits_out)

    def _shared(self, i, layer: Layer, runs, T, scratch, tables) -> int:
        """buf["shared"] = resid + linear(block([resid | embeddings])) of Zamba's shared block `layer.shared`:
        attention (with this use's adapters on q, k and v; its keys and values in cache slot i), then the gated MLP
        (the adapter on gate and up), no residual inside the block."""
        arch, buf, D, F = self.arch, scratch.p, self.arch.hidden_size, self.arch.intermediate_size
        u, blk = layer.shared, layer.shared.block
        a = blk.attn
        rc = lib.pt_copy_rows(buf["resid"], D, 0, buf["cat"], 2 * D, 0, T, D)
        rc |= lib.pt_copy_rows(buf["orig"], D, 0, buf["cat"], 2 * D, D, T, D)
        rc |= a.attn_norm(buf["cat"], T, 2 * D, buf["cat"])
        rc |= lib.pt_matmul3(a.q.c, a.k.c, a.v.c, buf["cat"], T, buf["q"], buf["k"], buf["v"])
        for A, B, name in u.attn_adapters():
            rc |= lib.pt_matmul(A.c, buf["cat"], T, buf["lora"], 0)
            rc |= lib.pt_matmul(B.c, buf["lora"], T, buf[name], 1)
        at, scale = 0, self._attn_scale()
        for s, (n, pos0, cache, _) in enumerate(runs):
            rc |= self._attention_of(i, a, n, pos0, cache, at, s, scratch, tables, scale)
            at += n
        rc |= lib.pt_matmul(a.o.c, buf["att"], T, buf["shared"], 0)
        rc |= a.mlp_norm(buf["shared"], T, D, buf["shared"])
        rc |= lib.pt_matmul3(a.gate.c, a.up.c, ffi.NULL, buf["shared"], T, buf["gate"], buf["up"], ffi.NULL)
        if u.mlp_a is not None:
            rc |= lib.pt_matmul(u.mlp_a.c, buf["shared"], T, buf["lora"], 0)
            rc |= lib.pt_matmul(u.gate_b.c, buf["lora"], T, buf["gate"], 1)
            rc |= lib.pt_matmul(u.up_b.c, buf["lora"], T, buf["up"], 1)
        rc |= lib.pt_glu(ACTIVATIONS[arch.act], buf["gate"], buf["up"], T * F, buf["mlp_hidden"])
        rc |= lib.pt_matmul(a.down.c, buf["mlp_hidden"], T, buf["branch"], 0)
        rc |= lib.pt_matmul(u.linear.c, buf["branch"], T, buf["shared"], 0)
        lib.pt_axpy(buf["shared"], 1.0, buf["resid"], T * D)
        return rc

    def _attention(self, i, layer: Layer, attn_in, runs, T, scratch, tables, scale) -> tuple[int, int]:
        """q|k|v of attn_in, their biases and norms over every sequence's rows; then per sequence RoPE and the store
        into its cache, and attention into its rows of buf["att"]: (rc, the first sequence that failed or -1)."""
        arch, buf = self.arch, scratch.p
        H, KV, hd = layer.heads or arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
        rc = lib.pt_matmul3(layer.q.c, layer.k.c, layer.v.c, attn_in, T, buf["q"], buf["k"], buf["v"])
        for t in ("q", "k", "v"):
            rc |= self._lora(layer, t, attn_in, T, buf, buf[t])
        if layer.attn_gate is not None:
            rc |= lib.pt_matmul(layer.attn_gate.c, attn_in, T, buf["qgate"], 0)
            if layer.attn_gate_b is not None:
                rc |= lib.pt_bias_act(buf["qgate"], layer.attn_gate_b.p, T, layer.attn_gate.shape[0], 0)
        for bias, name, width in ((layer.q_b, "q", H * hd), (layer.k_b, "k", KV * hd), (layer.v_b, "v", KV * hd)):
            if bias is not None:
                rc |= lib.pt_bias_act(buf[name], bias.p, T, width, 0)
            if layer.clip:
                rc |= lib.pt_param_act(0, buf[name], T * width, layer.param_ptr("clip"))
        if layer.mix_qkv is not None:        # ZAYA's CCA (fam36g): per sequence, its state in the cache
            rc |= layer.mix_qkv.run(i, buf, runs, T)
        if layer.norm_after_rope:            # rotate q and k in place first; the store below then only copies
            at = 0
            for s, (n, pos0, _, _) in enumerate(runs):
                cos_p, sin_p, n_pos, rot_dim, interleaved = self._rope_table(layer, s, pos0 + n, tables)
                rc |= lib.pt_rope(buf["q"] + at * H * hd, buf["k"] + at * KV * hd, n, H, KV, hd, rot_dim, pos0,
                                  cos_p, sin_p, n_pos, interleaved)
                at += n
        for norm, name, heads in ((layer.q_norm, "q", H), (layer.k_norm, "k", KV)):
            if norm is not None:
                if arch.qk_norm_per_head:    # each head's hd values: T * heads rows
                    rc |= norm(buf[name], T * heads, hd, buf[name])
                else:                        # each token's whole row
                    rc |= norm(buf[name], T, heads * hd, buf[name])
        if layer.pre_store is not None:      # SmallDoge, DiffLlama (fam36d): the key bias slots, the heads twice
            rc |= layer.pre_store.run(buf, T)
        failed, at = -1, 0
        for s, (n, pos0, cache, _) in enumerate(runs):
            seq_rc = self._attention_of(i, layer, n, pos0, cache, at, s, scratch, tables, scale)
            if seq_rc and failed < 0:
                failed = s
            rc |= seq_rc
            at += n
        return rc, failed

    def _mla(self, i, layer: Layer, attn_in, runs, T, scratch, tables, scale):
        """Latent attention (petit/models/blocks/mla.py), op by op: (rc, the first sequence that failed or -1, o_proj's
        input)."""
        m, buf = layer.mla, scratch.p
        b = {name: ptr for name, (_, ptr) in m.buffers(scratch.cap).items()}
        H, dn, dr, r, dv = m.heads, m.nope, m.rope, m.rank, m.v_dim
        hd = m.row                          # a cache row: dr + r, and DSA's indexer key behind them
        scale = scale if m.scale is None else m.scale
        rc, q_in = 0, attn_in
        if m.q_a is not None:
            rq = m.q_a.shape[0]
            rc |= lib.pt_matmul(m.q_a.c, attn_in, T, b["q_a"], 0)
            if m.q_cat:                     # A.X-K2 (fam36m): the query reads [normed ; raw]
                rc |= m.q_a_norm(b["q_a"], T, rq, b["q_n"])
                rc |= lib.pt_copy_rows(b["q_n"], rq, 0, b["q_cat"], 2 * rq, 0, T, rq)
                rc |= lib.pt_copy_rows(b["q_a"], rq, 0, b["q_cat"], 2 * rq, rq, T, rq)
            else:
                rc |= m.q_a_norm(b["q_a"], T, rq, b["q_a"])
            q_in = b["q_a"]
        q_resid, q_in = (b["q_n"], b["q_cat"]) if m.q_cat else (q_in, q_in)
        qg, xg = (m.gate, None) if not m.gate_x else (None, m.gate)
        rc |= lib.pt_matmul3(m.q.c, m.q_pe.c, qg.c if qg else ffi.NULL, q_in, T, b["q_nope"], b["q_pe"],
                             b["gate"] if qg else ffi.NULL)
        rc |= lib.pt_matmul3(m.c.c, m.k_pe.c, xg.c if xg else ffi.NULL, attn_in, T, b["c"], b["k_pe"],
                             b["gate"] if xg else ffi.NULL)
        rc |= m.kv_norm(b["c"], T, r, b["c"])
        if m.k_pe_norm is not None:         # Dots 3 (fam36k): k_pe RMS-normed before RoPE
            rc |= m.k_pe_norm(b["k_pe"], T, dr, b["k_pe"])
        d = m.dsa
        if d is not None:
            ib = {name: ptr for name, (_, ptr) in d.buffers(scratch.cap).items()}
            if not d.shared:                # the indexer's query, key and head weights; its key into the row
                Hi, Di = d.n_heads, d.dim
                rc |= lib.pt_matmul(d.wq_b.c, q_resid, T, ib["iq"], 0)
                rc |= lib.pt_matmul3(d.wk.c, d.w_proj.c, ffi.NULL, attn_in, T, ib["ik"], ib["iw"], ffi.NULL)
                rc |= d.k_norm(ib["ik"], T, Di, ib["ik"])
                at = 0
                for s, (n, pos0, _, _) in enumerate(runs):
                    key = (id(d.rope), s)
                    if key not in tables:
                        cos, sin = d.rope.tables(pos0 + n)
                        tables[key] = (fptr(cos), fptr(sin), cos.shape[0], d.rope.dim, int(d.rope.interleaved),
                                       (cos, sin))
                    cos_p, sin_p, n_pos, rot_dim, inter = tables[key][:5]
                    rc |= lib.pt_rope(ib["iq"] + at * Hi * Di, ib["ik"] + at * Di, n, Hi, 1, Di, rot_dim, pos0,
                                      cos_p, sin_p, n_pos, inter)
                    at += n
                rc |= lib.pt_copy_rows(ib["ik"], Di, 0, buf["k"], hd, dr + r, T, Di)
        rc |= lib.pt_copy_rows(b["q_pe"], dr, 0, buf["q"], hd, 0, T * H, dr)
        rc |= lib.pt_heads(m.tensors("k"), H, b["q_nope"], dn, 0, buf["q"], hd, dr, T, b["gin"], b["gout"])
        rc |= lib.pt_copy_rows(b["k_pe"], dr, 0, buf["k"], hd, 0, T, dr)
        rc |= lib.pt_copy_rows(b["c"], r, 0, buf["k"], hd, dr, T, r)
        failed, at = -1, 0
        for s, (n, pos0, cache, _) in enumerate(runs):
            if d is None:
                seq_rc = self._attention_of(i, layer, n, pos0, cache, at, s, scratch, tables, scale, values="k")
            else:
                seq_rc = self._dsa_of(i, layer, n, pos0, cache, at, s, scratch, tables, scale, ib)
            if seq_rc and failed < 0:
                failed = s
            rc |= seq_rc
            at += n
        rc |= lib.pt_heads(m.tensors("v"), H, buf["att"], hd, dr, b["o_in"], dv, 0, T, b["gin"], b["gout"])
        if m.gate is not None:              # sigmoid gates: one a head (Dots 3, Ling 3) or a value (A.X-K2, HY-V4)
            rc |= lib.pt_head_gate(GATE_ACTS["sigmoid"], b["gate"], b["o_in"], T, m.gate.shape[0], m.gate_width or dv)
        return rc, failed, b["o_in"]

    def _dsa_of(self, i, layer: Layer, T, pos0, cache, at, s, scratch, tables, scale, ib) -> int:
        """DeepSeek Sparse Attention of one sequence's T rows from row `at`: RoPE and the store of each row
        ([k_pe ; latent ; indexer key]), the indexer's choice (a full layer), attention over the chosen rows."""
        m, d, buf = layer.mla, layer.mla.dsa, scratch.p
        H, hd, w = m.heads, m.row, m.rope + m.rank
        q, k, att = buf["q"] + at * H * hd, buf["k"] + at * hd, buf["att"] + at * H * hd
        cos_p, sin_p, n_pos, rot_dim, interleaved = self._rope_table(layer, s, pos0 + T, tables)
        int8 = cache.kv_type == "int8"
        if int8:
            scales = cache.ks_ptr[i]
            rc = lib.pt_rope_store_q8(q, k, k, T, H, 1, hd, rot_dim, pos0, cos_p, sin_p, n_pos, interleaved,
                                      cache.k_ptr[i], scales, cache.v_ptr[i], cache.vs_ptr[i], cache.n_ctx)
        else:
            scales = ffi.NULL
            rc = lib.pt_rope_store(q, k, k, T, H, 1, hd, rot_dim, pos0, cos_p, sin_p, n_pos, interleaved,
                                   cache.k_ptr[i], cache.v_ptr[i], cache.n_ctx)
        sel, n_sel = ib["sel"] + at * d.top_k, ib["n_sel"] + at
        if not d.shared:
            rc |= lib.pt_dsa_index(ib["iq"] + at * d.n_heads * d.dim, ib["iw"] + at * d.n_heads, cache.k_ptr[i],
                                   scales, int(int8), hd, w, cache.n_ctx, T, pos0, d.n_heads, d.dim, d.dim ** -0.5,
                                   d.n_heads ** -0.5, d.top_k, sel, n_sel)
        return rc | lib.pt_dsa_attention(q, cache.k_ptr[i], scales, int(int8), hd, cache.n_ctx, T, pos0, H, w, scale,
                                         sel, n_sel, d.top_k, layer.sinks.p if layer.sinks else ffi.NULL, att)

    @staticmethod
    def _rope_table(layer: Layer, s: int, n: int, tables: dict) -> tuple:
        """The RoPE table of the layer's rope for sequence s, covering n positions, made once per pass."""
        key = (id(layer.rope), s)
        if key not in tables:
            cos, sin = layer.rope.tables(n)
            tables[key] = (fptr(cos), fptr(sin), cos.shape[0], layer.rope.dim, int(layer.rope.interleaved),
                           (cos, sin))
        return tables[key][:5]

    def _attention_of(self, i, layer: Layer, T, pos0, cache, at, s, scratch, tables, scale, values="v") -> int:
        """RoPE + the cache store, then attention, of one sequence's T rows starting at row `at`."""
        arch, buf = self.arch, scratch.p
        H, KV, hd = layer.heads or arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
        if layer.mla is not None:            # latent attention: one kv head, the layer's own heads and rows
            H, KV, hd = layer.mla.heads, 1, layer.mla.row
        q, att = buf["q"] + at * H * hd, buf["att"] + at * H * hd
        extra = layer.attn_extra()
        k, v = buf["k"] + at * KV * hd, buf[values] + at * KV * hd
        if layer.rope is not None and not layer.norm_after_rope:
            cos_p, sin_p, n_pos, rot_dim, interleaved = self._rope_table(layer, s, pos0 + T, tables)
        else:
            cos_p, sin_p, n_pos, rot_dim, interleaved = ffi.NULL, ffi.NULL, 0, 0, 0
        k_cache, v_cache = cache.k_ptr[i], cache.v_ptr[i]
        int8 = cache.kv_type == "int8"
        if int8:
            k_scales, v_scales = cache.ks_ptr[i], cache.vs_ptr[i]
            rc = lib.pt_rope_store_q8(q, k, v, T, H, KV, hd, rot_dim, pos0, cos_p, sin_p, n_pos, interleaved,
                                      k_cache, k_scales, v_cache, v_scales, cache.n_ctx)
        else:
            rc = lib.pt_rope_store(q, k, v, T, H, KV, hd, rot_dim, pos0, cos_p, sin_p, n_pos, interleaved, k_cache,
                                   v_cache, cache.n_ctx)
        if layer.sparse is not None:        # MiniMax-M3 (fam36i): the indexer's choice, attention over it
            table = (cos_p, sin_p, n_pos, rot_dim, interleaved) if rot_dim else None
            return rc | layer.sparse.attend(i, T, pos0, cache, at, q, att, H, KV, hd, scale, table)
        if int8:
            return rc | lib.pt_attention_q8(q, k_cache, k_scales, v_cache, v_scales, cache.n_ctx, T, H, KV, hd,
                                            pos0, scale, arch.attn_softcap, layer.window, extra, att)
        return rc | lib.pt_attention(q, k_cache, v_cache, cache.n_ctx, T, H, KV, hd, pos0, scale, arch.attn_softcap,
                                     layer.window, extra, att)

    @staticmethod
    def _gate(layer: Layer, att, T, buf) -> int:
        """The heads' outputs times their gates: sigmoid of each value (Qwen3-Next), or Laguna's softplus (fam36g)."""
        if layer.attn_gate_act == "sigmoid" and layer.attn_gate_width == 1:
            return lib.pt_glu(GLU_ACTIVATIONS["sigmoid"], buf["qgate"], att, T * layer.o.shape[1], att)
        return lib.pt_head_gate(GATE_ACTS[layer.attn_gate_act], buf["qgate"], att, T, layer.attn_gate.shape[0],
                                layer.attn_gate_width)

    def _mlp(self, layer: Layer, mlp_in, T, F, scratch) -> int:
        """buf["mlp_hidden"] = act(gate) * up (gated) or act(up + bias) (plain) of mlp_in."""
        buf, act = scratch.p, ACTIVATIONS.get(self.arch.act)
        if layer.gate is not None:      # a gated MLP: GLU_ACTIVATIONS (gpt-oss's clamped SwiGLU too: MiniMax-M3)
            act = GLU_ACTIVATIONS[self.arch.act]
            rc = lib.pt_matmul3(layer.gate.c, layer.up.c, ffi.NULL, mlp_in, T, buf["gate"], buf["up"], ffi.NULL)
            rc |= self._lora(layer, "gate", mlp_in, T, buf, buf["gate"])
            rc |= self._lora(layer, "up", mlp_in, T, buf, buf["up"])
            if layer.gate_b is not None:
                rc |= lib.pt_bias_act(buf["gate"], layer.gate_b.p, T, F, 0)
            if layer.up_b is not None:
                rc |= lib.pt_bias_act(buf["up"], layer.up_b.p, T, F, 0)
            for name, cols in zip(("gate", "up"), layer.glu_scales or ()):     # Dory's suv (fam36h)
                rc |= lib.pt_scale_cols(buf[name], cols.p, T, F)
            return rc | lib.pt_glu(act, buf["gate"], buf["up"], T * F, buf["mlp_hidden"])
        rc = lib.pt_matmul(layer.up.c, mlp_in, T, buf["mlp_hidden"], 0)
        if layer.mlp_act is not None:
            rc |= lib.pt_bias_act(buf["mlp_hidden"], layer.up_b.p if layer.up_b else ffi.NULL, T, F, 0)
            return rc | lib.pt_param_act(layer.mlp_act[0], buf["mlp_hidden"], T * F, layer.param_ptr("act"))
        return rc | lib.pt_bias_act(buf["mlp_hidden"], layer.up_b.p if layer.up_b else ffi.NULL, T, F, act)

    def _alpha(self, alpha: float, T, scratch) -> None:
        """resid *= alpha before a sublayer's add (MiniMax's DeepNorm; nothing when alpha is 1; a Vec: per channel,
        SmallDoge; a Norm: resid = norm(resid), ZAYA's (resid + b) * w)."""
        if isinstance(alpha, Norm):
            alpha(scratch.p["resid"], T, self.arch.hidden_size, scratch.p["resid"])
        elif isinstance(alpha, Vec):
            lib.pt_scale_cols(scratch.p["resid"], alpha.p, T, self.arch.hidden_size)
        elif alpha != 1.0:
            lib.pt_axpy(scratch.p["resid"], alpha - 1.0, scratch.p["resid"], T * self.arch.hidden_size)

    @staticmethod
    def _lora(layer: Layer, target: str, x, T, buf, y) -> int:
        """y += B (A x): the layer's run-time adapter of `target`, if it has one (issue 33)."""
        if layer.lora is None or target not in layer.lora:
            return 0
        A, B = layer.lora[target]
        return lib.pt_matmul(A.c, x, T, buf["lora_x"], 0) | lib.pt_matmul(B.c, buf["lora_x"], T, y, 1)

    def _residual(self, W: Weight, b: Vec | None, post: Norm | None, inp, T, scratch, layer=None, target="") -> int:
        """resid += residual_scale * post(W inp + b): the product adds straight into resid when nothing sits
        between, else it goes through buf["branch"]. layer, target: whose run-time adapter adds to the product."""
        arch, buf, D = self.arch, scratch.p, self.arch.hidden_size
        if post is None and arch.residual_scale == 1.0:
            rc = lib.pt_matmul(W.c, inp, T, buf["resid"], 1)
            if layer is not None:
                rc |= self._lora(layer, target, inp, T, buf, buf["resid"])
            return rc | (lib.pt_bias_act(buf["resid"], b.p, T, D, 0) if b is not None else 0)
        rc = lib.pt_matmul(W.c, inp, T, buf["branch"], 0)
        if layer is not None:
            rc |= self._lora(layer, target, inp, T, buf, buf["branch"])
        if b is not None:
            rc |= lib.pt_bias_act(buf["branch"], b.p, T, D, 0)
        return rc | self._add_branch(post, T, scratch)

    def _add_branch(self, post: Norm | None, T, scratch) -> int:
        """resid += residual_scale * post(buf["branch"])."""
        arch, buf, D = self.arch, scratch.p, self.arch.hidden_size
        rc = post(buf["branch"], T, D, buf["branch"]) if post is not None else 0
        lib.pt_axpy(buf["resid"], arch.residual_scale, buf["branch"], T * D)
        return rc

    def _head(self, buf, runs, D, logits_out) -> None:
        """The final norm of each sequence's last n_logits positions, packed in order, then the LM head over all
        (with head_dense: the final norm, W, the activation over every position first, then its norm packs them)."""
        arch = self.arch
        rc, at, out = 0, 0, 0
        x, last = buf["resid"], self.final_norm
        if self.head_dense is not None:
            hd, T = self.head_dense, sum(r[0] for r in runs)
            rc |= self.final_norm(x, T, D, buf["normed"])
            rc |= lib.pt_matmul(hd.W.c, buf["normed"], T, buf["branch"], 0)
            rc |= lib.pt_bias_act(buf["branch"], hd.b.p if hd.b is not None else ffi.NULL, T, D, ACTIVATIONS[hd.act])
            x, last = buf["branch"], hd.norm
        for T, _, _, n in runs:
            if n and last is None:
                ffi.memmove(buf["normed"] + out * D, x + (at + T - n) * D, n * D * 4)
            elif n:
                rc |= last(x + (at + T - n) * D, n, D, buf["normed"] + out * D)
            at += T
            out += n
        if rc or lib.pt_matmul(self.lm_head.c, buf["normed"], out, fptr(logits_out), 0):
            raise RuntimeError("kernel error in the final norm or the LM head")
        if self.lm_head_b is not None:
            logits_out += self.lm_head_b.a
        if arch.logit_scale != 1.0:
            logits_out *= np.float32(arch.logit_scale)
        if arch.logit_softcap:               # in C, as the plan's: NumPy's own tanh may differ in the last bit
            lib.pt_softcap(fptr(logits_out), logits_out.size, arch.logit_softcap)
        if self.logit_cols is not None:      # as _forward does after the plan
            logits_out *= self.logit_cols.a

    # ---- the plan: the same calls as the oracle above, described once for kernels/plan.c ----
    def _build_plan(self, scratch: _Scratch) -> Plan:
        """The ops of `_forward_oracle`, in its order, over this scratch's buffers; row counts scale with T in C."""
        arch, buf, plan = self.arch, scratch.p, Plan(scratch)
        D = arch.hidden_size
        plan.embed(self.embed, buf["resid"], D, arch.embed_scale, self.pos_embed)
        if self.embed_norm is not None:
            plan.norm(-1, self.embed_norm, buf["resid"], 1, D, buf["resid"])
        if arch.shared_rank >= 0:
            plan.copy(-1, buf["resid"], D, 0, buf["orig"], D, 0, 1, D)
        for i, layer in enumerate(self.layers):
            if layer.pre_block is not None:    # Dory (fam36h): the stream normed in place, a loop's entry
                layer.pre_block.plan(plan, i, buf)
            attn_in = buf["resid"]
            if layer.shared is not None:
                self._plan_shared(plan, i, layer, buf)
                plan.norm(i, layer.attn_norm, buf["shared"], 1, D, buf["normed"])
                attn_in = buf["normed"]
            elif layer.attn_norm is not None:
                plan.norm(i, layer.attn_norm, buf["resid"], 1, D, buf["normed"])
                attn_in = buf["normed"]
            if layer.mamba is not None:
                slot = layer.state_slot
                if arch.residual_scale == 1.0 and layer.resid_alpha[0] == 1.0 and layer.mixer_norm is None:
                    plan.mamba(i, layer.mamba.c(scratch.cap), attn_in, buf["resid"], accumulate=True, slot=slot)
                else:                           # Granite's residual_multiplier, MiniMax's alpha, LFM3's mixer norm
                    plan.mamba(i, layer.mamba.c(scratch.cap), attn_in, buf["branch"], slot=slot)
                    if layer.mixer_norm is not None:
                        plan.norm(i, layer.mixer_norm, buf["branch"], 1, D, buf["branch"])
                    self._plan_alpha(plan, i, layer.resid_alpha[0], buf)
                    plan.axpy(i, buf["resid"], arch.residual_scale, buf["branch"], D)
                if layer.down is None and layer.moe is None:    # a Mamba block: the mixer only
                    continue
            mlp_in = None
            if arch.parallel:
                if layer.mlp_norm is not None:
                    plan.norm(i, layer.mlp_norm, buf["resid"], 1, D, buf["normed_mlp"])
                    mlp_in = buf["normed_mlp"]
                else:
                    mlp_in = attn_in
            if layer.o is not None:             # attention (beside a mixer in Falcon-H1's layers)
                if layer.mla is not None:
                    att = self._plan_mla(plan, i, layer, attn_in, buf, scratch)
                else:
                    self._plan_attention(plan, i, layer, attn_in, buf)
                    att = buf["att"]
                    if layer.att_out is not None:       # DiffLlama, SmallDoge (fam36d): o_proj's input
                        att = layer.att_out.plan(plan, i, att, buf)
                    if layer.moa_router is not None:    # JetMoE: the attention experts weighed (jetmoe group)
                        logits = layer.moa_logits(scratch.cap)
                        plan.matmul(i, [layer.moa_router], attn_in, [logits])
                        plan.moa_gate(i, logits, layer.moa_router.shape[0], layer.moa_top_k,
                                      arch.num_key_value_heads, arch.head_dim, att)
                    if layer.attn_gate is not None:
                        if layer.attn_gate_act == "sigmoid" and layer.attn_gate_width == 1:
                            plan.glu(i, GLU_ACTIVATIONS["sigmoid"], buf["qgate"], att, layer.o.shape[1], att)
                        else:                   # Laguna (fam36g): softplus, per head or per value
                            plan.head_gate(i, GATE_ACTS[layer.attn_gate_act], buf["qgate"], att,
                                           layer.attn_gate.shape[0], layer.attn_gate_width)
                    if layer.o_norm is not None:
                        plan.norm(i, layer.o_norm, att, 1, layer.o.shape[1], att)
                self._plan_alpha(plan, i, layer.resid_alpha[0], buf)
                self._plan_residual(plan, i, layer.o, layer.o_b, layer.post_attn_norm, att, buf, layer, "o")
            if layer.resid_attn_norm is not None:
                plan.norm(i, layer.resid_attn_norm, buf["resid"], 1, D, buf["resid"])
            if layer.down is None and layer.moe is None:        # an attention block without an MLP (Nemotron-H)
                continue
            if mlp_in is None:
                mlp_in = buf["resid"]
                if layer.mlp_norm is not None:
                    plan.norm(i, layer.mlp_norm, buf["resid"], 1, D, buf["normed"])
                    mlp_in = buf["normed"]
            if layer.moe_shortcut:             # LongCat-Flash: the MoE beside the dense MLP, held (longcat group)
                plan.moe(i, layer.moe.c(scratch.cap), mlp_in, buf["stash"])
            if layer.pre_moe is not None:      # ZAYA's router MLP (fam36g): the experts' logits
                layer.pre_moe.plan(plan, i, mlp_in, buf)
            if layer.moe is not None and not layer.moe_shortcut:
                plan.moe(i, layer.moe.c(scratch.cap), mlp_in, buf["branch"])
                if layer.down_b is not None:            # an output bias after the experts (JetMoE, jetmoe group)
                    plan.bias_act(i, buf["branch"], layer.down_b, D, 0)
                self._plan_alpha(plan, i, layer.resid_alpha[1], buf)
                self._plan_add_branch(plan, i, layer.post_mlp_norm, buf)
            else:
                self._plan_mlp(plan, i, layer, mlp_in, buf)
                if layer.down_norm is not None:
                    plan.norm(i, layer.down_norm, buf["mlp_hidden"], 1, arch.intermediate_size, buf["mlp_hidden"])
                self._plan_alpha(plan, i, layer.resid_alpha[1], buf)
                self._plan_residual(plan, i, layer.down, layer.down_b, layer.post_mlp_norm, buf["mlp_hidden"], buf,
                                    layer, "down")
            if layer.add_shortcut:             # LongCat-Flash: the previous layer's shortcut MoE output
                plan.axpy(i, buf["resid"], 1.0, buf["stash"], D)
            if layer.resid_mlp_norm is not None:
                plan.norm(i, layer.resid_mlp_norm, buf["resid"], 1, D, buf["resid"])
        x, last, hd = buf["resid"], self.final_norm, self.head_dense
        if hd is not None:                     # issue 36, fam36j: ModernBERT's prediction head before the LM head
            L = len(self.layers)
            plan.norm(L, self.final_norm, x, 1, D, buf["normed"])
            plan.matmul(L, [hd.W], buf["normed"], [buf["branch"]])
            plan.bias_act(L, buf["branch"], hd.b, D, ACTIVATIONS[hd.act])
            x, last = buf["branch"], hd.norm
        plan.head(len(self.layers), last, x, D, buf["normed"], self.lm_head, self.lm_head_b, arch.logit_scale,
                  arch.logit_softcap)
        return plan.finish()

    def _plan_shared(self, plan: Plan, i, layer: Layer, buf) -> None:
        """The ops of `_shared`, in its order."""
        arch, D, F = self.arch, self.arch.hidden_size, self.arch.intermediate_size
        H, KV, hd = arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
        u, a = layer.shared, layer.shared.block.attn
        plan.copy(i, buf["resid"], D, 0, buf["cat"], 2 * D, 0, 1, D)
        plan.copy(i, buf["orig"], D, 0, buf["cat"], 2 * D, D, 1, D)
        plan.norm(i, a.attn_norm, buf["cat"], 1, 2 * D, buf["cat"])
        plan.matmul(i, [a.q, a.k, a.v], buf["cat"], [buf["q"], buf["k"], buf["v"]])
        for A, B, name in u.attn_adapters():
            plan.matmul(i, [A], buf["cat"], [buf["lora"]])
            plan.matmul(i, [B], buf["lora"], [buf[name]], accumulate=True)
        plan.rope_store(i, a.rope, buf["q"], buf["k"], buf["v"], H, KV, hd)
        plan.attention(i, buf["q"], H, KV, hd, self._attn_scale(), arch.attn_softcap, a.window, buf["att"])
        plan.matmul(i, [a.o], buf["att"], [buf["shared"]])
        plan.norm(i, a.mlp_norm, buf["shared"], 1, D, buf["shared"])
        plan.matmul(i, [a.gate, a.up], buf["shared"], [buf["gate"], buf["up"]])
        if u.mlp_a is not None:
            plan.matmul(i, [u.mlp_a], buf["shared"], [buf["lora"]])
            plan.matmul(i, [u.gate_b], buf["lora"], [buf["gate"]], accumulate=True)
            plan.matmul(i, [u.up_b], buf["lora"], [buf["up"]], accumulate=True)
        plan.glu(i, ACTIVATIONS[arch.act], buf["gate"], buf["up"], F, buf["mlp_hidden"])
        plan.matmul(i, [a.down], buf["mlp_hidden"], [buf["branch"]])
        plan.matmul(i, [u.linear], buf["branch"], [buf["shared"]])
        plan.axpy(i, buf["shared"], 1.0, buf["resid"], D)

    def _plan_attention(self, plan: Plan, i, layer: Layer, attn_in, buf) -> None:
        arch = self.arch
        H, KV, hd = layer.heads or arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
        plan.matmul(i, [layer.q, layer.k, layer.v], attn_in, [buf["q"], buf["k"], buf["v"]])
        for t in ("q", "k", "v"):
            self._plan_lora(plan, i, layer, t, attn_in, buf, buf[t])
        if layer.attn_gate is not None:
            plan.matmul(i, [layer.attn_gate], attn_in, [buf["qgate"]])
            if layer.attn_gate_b is not None:
                plan.bias_act(i, buf["qgate"], layer.attn_gate_b, layer.attn_gate.shape[0], 0)
        for bias, name, width in ((layer.q_b, "q", H * hd), (layer.k_b, "k", KV * hd), (layer.v_b, "v", KV * hd)):
            if bias is not None:
                plan.bias_act(i, buf[name], bias, width, 0)
            if layer.clip:
                plan.param_act(i, 0, buf[name], width, (-layer.clip, layer.clip))
        if layer.mix_qkv is not None:        # ZAYA's CCA (fam36g)
            layer.mix_qkv.plan(plan, i, buf)
        if layer.norm_after_rope:
            plan.rope(i, layer.rope, buf["q"], buf["k"], H, KV, hd)
        for norm, name, heads in ((layer.q_norm, "q", H), (layer.k_norm, "k", KV)):
            if norm is not None:
                if arch.qk_norm_per_head:
                    plan.norm(i, norm, buf[name], heads, hd, buf[name])
                else:
                    plan.norm(i, norm, buf[name], 1, heads * hd, buf[name])
        if layer.pre_store is not None:      # SmallDoge, DiffLlama (fam36d): the key bias slots, the heads twice
            layer.pre_store.plan(plan, i, buf)
        plan.rope_store(i, None if layer.norm_after_rope else layer.rope, buf["q"], buf["k"], buf["v"], H, KV, hd)
        if layer.sparse is not None:        # MiniMax-M3 (fam36i): the indexer's choice, attention over it
            layer.sparse.plan_attend(plan, i, buf["q"], buf["att"], H, KV, hd, self._attn_scale())
            return
        plan.attention(i, buf["q"], H, KV, hd, self._attn_scale(), arch.attn_softcap, layer.window, buf["att"],
                       layer.sinks, layer.chunk, layer.temperature, layer.alibi, layer.bidirectional)

    def _plan_mla(self, plan: Plan, i, layer: Layer, attn_in, buf, scratch):
        """The ops of `_mla`, in its order; returns o_proj's input."""
        m = layer.mla
        b = {name: ptr for name, (_, ptr) in m.buffers(scratch.cap).items()}
        H, dn, dr, r, dv = m.heads, m.nope, m.rope, m.rank, m.v_dim
        hd, scale = m.row, self._attn_scale() if m.scale is None else m.scale
        q_in = attn_in
        if m.q_a is not None:
            rq = m.q_a.shape[0]
            plan.matmul(i, [m.q_a], attn_in, [b["q_a"]])
            if m.q_cat:                         # A.X-K2 (fam36m): the query reads [normed ; raw]
                plan.norm(i, m.q_a_norm, b["q_a"], 1, rq, b["q_n"])
                plan.copy(i, b["q_n"], rq, 0, b["q_cat"], 2 * rq, 0, 1, rq)
                plan.copy(i, b["q_a"], rq, 0, b["q_cat"], 2 * rq, rq, 1, rq)
            else:
                plan.norm(i, m.q_a_norm, b["q_a"], 1, rq, b["q_a"])
            q_in = b["q_a"]
        q_resid, q_in = (b["q_n"], b["q_cat"]) if m.q_cat else (q_in, q_in)
        g = [m.gate] if m.gate is not None else []
        plan.matmul(i, [m.q, m.q_pe] + (g if not m.gate_x else []), q_in,
                    [b["q_nope"], b["q_pe"]] + ([b["gate"]] if g and not m.gate_x else []))
        plan.matmul(i, [m.c, m.k_pe] + (g if m.gate_x else []), attn_in,
                    [b["c"], b["k_pe"]] + ([b["gate"]] if g and m.gate_x else []))
        plan.norm(i, m.kv_norm, b["c"], 1, r, b["c"])
        if m.k_pe_norm is not None:
            plan.norm(i, m.k_pe_norm, b["k_pe"], 1, dr, b["k_pe"])
        d = m.dsa
        if d is not None:
            ib = {name: ptr for name, (_, ptr) in d.buffers(scratch.cap).items()}
            if not d.shared:
                plan.matmul(i, [d.wq_b], q_resid, [ib["iq"]])
                plan.matmul(i, [d.wk, d.w_proj], attn_in, [ib["ik"], ib["iw"]])
                plan.norm(i, d.k_norm, ib["ik"], 1, d.dim, ib["ik"])
                plan.rope(i, d.rope, ib["iq"], ib["ik"], d.n_heads, 1, d.dim)
                plan.copy(i, ib["ik"], d.dim, 0, buf["k"], hd, dr + r, 1, d.dim)
        plan.copy(i, b["q_pe"], dr, 0, buf["q"], hd, 0, H, dr)
        plan.heads(i, m.tensors("k"), H, b["q_nope"], dn, 0, buf["q"], hd, dr, b["gin"], b["gout"])
        plan.copy(i, b["k_pe"], dr, 0, buf["k"], hd, 0, 1, dr)
        plan.copy(i, b["c"], r, 0, buf["k"], hd, dr, 1, r)
        plan.rope_store(i, layer.rope, buf["q"], buf["k"], buf["k"], H, 1, hd)
        if d is None:
            plan.attention(i, buf["q"], H, 1, hd, scale, 0.0, layer.window, buf["att"], layer.sinks, layer.chunk,
                           layer.temperature)
        else:
            if not d.shared:
                plan.dsa_index(i, ib["iq"], ib["iw"], d.n_heads, d.dim, hd, dr + r, d.dim ** -0.5,
                               d.n_heads ** -0.5, d.top_k, ib["sel"], ib["n_sel"])
            plan.dsa_attention(i, buf["q"], H, hd, dr + r, scale, d.top_k, ib["sel"], ib["n_sel"], buf["att"],
                               layer.sinks)
        plan.heads(i, m.tensors("v"), H, buf["att"], hd, dr, b["o_in"], dv, 0, b["gin"], b["gout"])
        if m.gate is not None:                  # sigmoid gates: one a head (Dots 3, Ling 3) or a value (A.X-K2, HY-V4)
            plan.head_gate(i, GATE_ACTS["sigmoid"], b["gate"], b["o_in"], m.gate.shape[0], m.gate_width or dv)
        return b["o_in"]

    def _plan_mlp(self, plan: Plan, i, layer: Layer, mlp_in, buf) -> None:
        F, act = self.arch.intermediate_size, ACTIVATIONS.get(self.arch.act)
        if layer.gate is not None:      # a gated MLP: GLU_ACTIVATIONS (gpt-oss's clamped SwiGLU too: MiniMax-M3)
            act = GLU_ACTIVATIONS[self.arch.act]
            plan.matmul(i, [layer.gate, layer.up], mlp_in, [buf["gate"], buf["up"]])
            self._plan_lora(plan, i, layer, "gate", mlp_in, buf, buf["gate"])
            self._plan_lora(plan, i, layer, "up", mlp_in, buf, buf["up"])
            if layer.gate_b is not None:
                plan.bias_act(i, buf["gate"], layer.gate_b, F, 0)
            if layer.up_b is not None:
                plan.bias_act(i, buf["up"], layer.up_b, F, 0)
            for name, cols in zip(("gate", "up"), layer.glu_scales or ()):     # Dory's suv (fam36h)
                plan.scale_cols(i, buf[name], cols, F)
            plan.glu(i, act, buf["gate"], buf["up"], F, buf["mlp_hidden"])
            return
        plan.matmul(i, [layer.up], mlp_in, [buf["mlp_hidden"]])
        if layer.mlp_act is not None:
            plan.bias_act(i, buf["mlp_hidden"], layer.up_b, F, 0)
            plan.param_act(i, layer.mlp_act[0], buf["mlp_hidden"], F, layer.mlp_act[1])
            return
        plan.bias_act(i, buf["mlp_hidden"], layer.up_b, F, act)

    def _plan_alpha(self, plan: Plan, i, alpha: float, buf) -> None:
        if isinstance(alpha, Norm):
            plan.norm(i, alpha, buf["resid"], 1, self.arch.hidden_size, buf["resid"])
        elif isinstance(alpha, Vec):
            plan.scale_cols(i, buf["resid"], alpha, self.arch.hidden_size)
        elif alpha != 1.0:
            plan.axpy(i, buf["resid"], alpha - 1.0, buf["resid"], self.arch.hidden_size)

    @staticmethod
    def _plan_lora(plan: Plan, i, layer: Layer, target: str, x, buf, y) -> None:
        """The ops of `_lora`."""
        if layer.lora is not None and target in layer.lora:
            A, B = layer.lora[target]
            plan.matmul(i, [A], x, [buf["lora_x"]])
            plan.matmul(i, [B], buf["lora_x"], [y], accumulate=True)

    def _plan_residual(self, plan: Plan, i, W: Weight, b: Vec | None, post: Norm | None, inp, buf, layer=None,
                       target="") -> None:
        arch, D = self.arch, self.arch.hidden_size
        if post is None and arch.residual_scale == 1.0:
            plan.matmul(i, [W], inp, [buf["resid"]], accumulate=True)
            if layer is not None:
                self._plan_lora(plan, i, layer, target, inp, buf, buf["resid"])
            if b is not None:
                plan.bias_act(i, buf["resid"], b, D, 0)
            return
        plan.matmul(i, [W], inp, [buf["branch"]])
        if layer is not None:
            self._plan_lora(plan, i, layer, target, inp, buf, buf["branch"])
        if b is not None:
            plan.bias_act(i, buf["branch"], b, D, 0)
        self._plan_add_branch(plan, i, post, buf)

    def _plan_add_branch(self, plan: Plan, i, post: Norm | None, buf) -> None:
        arch, D = self.arch, self.arch.hidden_size
        if post is not None:
            plan.norm(i, post, buf["branch"], 1, D, buf["branch"])
        plan.axpy(i, buf["resid"], arch.residual_scale, buf["branch"], D)
