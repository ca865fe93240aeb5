"""A mixture-of-experts MLP as the decoder runs it: the router, each expert's gate / up / down matrices and an
optional shared expert, routed in C (kernels/moe.c: softmax, top-k, each chosen expert's matrices multiplied once
for the tokens that chose it). A family's builder makes one `Moe` per sparse layer (`moe_weights`)."""
from dataclasses import dataclass, field

import numpy as np

from petit.native import ACTIVATIONS, GLU_ACTIVATIONS, Weight, ffi, lib


@dataclass
class Moe:
    """router [E, D] (float), experts' gate / up [F, D] and down [D, F], `top_k` of them per token, their weights
    renormalised to sum 1 with `norm_topk`; `shared` (gate, up, down) with `shared_gate` [1, D] a shared expert
    behind a sigmoid gate (Qwen2-MoE); `router_b` and the experts' `gate_b` / `up_b` / `down_b` biases (Vecs, gpt-oss)
    or None."""
    router: Weight
    gate: list
    up: list
    down: list
    top_k: int
    norm_topk: bool
    act: str = "silu"
    shared: tuple | None = None
    shared_gate: Weight | None = None
    router_b: object = None
    gate_b: list | None = None
    up_b: list | None = None
    down_b: list | None = None
    scoring: str = "softmax"            # or "sigmoid" (Llama 4, DeepSeek-V3), "sparsemixer" (PhiMoE)
    scale_input: bool = False           # the weight scales the expert's input (Llama 4)
    sel_bias: object = None             # a Vec added to the scores for the choice only (DeepSeek-V3)
    n_group: int = 0                    # > 1: group-limited routing over n_group groups (DeepSeek)
    topk_group: int = 0
    group_score: str = "max"            # or "top2_sum" (DeepSeek-V3)
    routed_scale: float = 1.0
    shared_b: tuple | None = None       # the shared expert's (gate, up, down) biases (ERNIE 4.5)
    norm_eps: float = 0.0               # with norm_topk: weights / (their sum + norm_eps) (LFM2-MoE's 1e-6)
    jitter_eps: float = 0.0             # issue 30, moe_a: scoring "sparsemixer" (PhiMoE)'s relative threshold
    plain: bool = False                 # experts act(up x) -> down with no gate (Nemotron-H; gate is None, and the
                                        # shared expert's (None, up, down)); act then one of ACTIVATIONS
    n_zero: int = 0                     # issue 30, longcat: zero-computation experts after the real ones (the router's
                                        # last n_zero rows): a token choosing one adds its input times the weight
    swiglu_limit: float = 0.0           # issue 30, dsv4: > 0 clamps every expert's gate to <= it, up to [-it, it]
    tid2eid: object = None              # issue 30, dsv4: hash routing, [vocab, top_k] experts by token (route_tokens)
    bias_logits: bool = False           # issue 36, fam36e: the choice on the logits + sel_bias (Kolibri 1), not on
                                        # the scores + sel_bias; the weights stay the chosen scores
    post_norm: object = None            # issue 36, fam36h: a Vec [E, D]: each chosen expert's output RMS-normed with
    sh_post_norm: object = None         # its row before its weight (Ergo), a Vec [D]: the shared expert's likewise
    post_norm_eps: float = 0.0
    logit_softcap: float = 0.0          # issue 36, fam36g: > 0: the logits cap tanh(l / cap) first (Laguna)
    ext_logits: bool = False            # issue 36, fam36g: the logits are written by the layer's pre_moe (ZAYA's
                                        # router MLP), not made by `router` (then its output matrix, for the record)
    zero_skip: bool = False             # issue 36, fam36g: a zero-computation expert adds nothing (ZAYA's skip)
    gate_softcap: float = 0.0           # issue 36, fam36l: > 0: the experts' activation cg tanh(g / cg) sigmoid(g) x
    up_softcap: float = 0.0             # cu tanh(u / cu) (u when up_softcap is 0): Inkling 2's soft-capped SwiGLU
    group_fill_zero: bool = False       # issue 36, fam36m: the other groups' experts score 0, not out (A.X-K2)
    limit_after_act: bool = False       # issue 36, fam36m: swiglu_limit clamps act(gate) and up after the
                                        # activation (Ling 3's Step3p7 experts), not the gate before it
    sh_swiglu_limit: float | None = None    # issue 36, fam36m: the shared expert's own clamp (0: none; None: the
                                            # routed experts' swiglu_limit, DeepSeek-V4's)
    _c: object = field(default=None, repr=False)
    _cap: int = field(default=0, repr=False)
    _keep: list = field(default_factory=list, repr=False)
    _forced: object = field(default=None, repr=False)
    used: int = field(default=0, repr=False)      # expert matrices multiplied before the struct was last rebuilt

    def matrices(self) -> list:
        out = [*(self.gate or []), *self.up, *self.down]
        if self.shared is not None:
            out += [w for w in self.shared if w is not None]
        return out

    def replace(self, new: dict) -> None:
        """Swap matrices for the same values in another layout (`new`: id(old) -> new); the struct is rebuilt."""
        self.gate = None if self.gate is None else [new.get(id(w), w) for w in self.gate]
        self.up = [new.get(id(w), w) for w in self.up]
        self.down = [new.get(id(w), w) for w in self.down]
        if self.shared is not None:
            self.shared = tuple(None if w is None else new.get(id(w), w) for w in self.shared)
        self._release()

    def _release(self) -> None:
        if self._c is not None:
            self.used += self._c.matrices_used
        self._c, self._cap = None, 0

    @property
    def matrices_used(self) -> int:
        """Expert matrices multiplied so far (3 per expert a step ran, and 3 for the shared expert)."""
        return self.used + (self._c.matrices_used if self._c is not None else 0)

    def c(self, cap: int):
        """The pt_moe record for steps of up to `cap` tokens (its scratch allocated here, kept with it)."""
        if self._c is not None and self._cap >= cap:
            return self._c
        self._release()
        E, D = len(self.up) + self.n_zero, (self.up[0] if self.ext_logits else self.router).shape[1]
        widths = [self.up[0].shape[0]] + ([self.shared[1].shape[0]] if self.shared is not None else [])
        F = max(widths)
        m = ffi.new("pt_moe *")
        keep = [m]

        def arr(shape, dtype=np.float32):
            a = np.zeros(shape, dtype)
            keep.append(a)
            return ffi.cast("float *" if dtype == np.float32 else "int32_t *", ffi.from_buffer(a))

        def tensors(ws):
            p = ffi.new("const pt_tensor *[]", [w.c for w in ws])
            keep.append(p)
            return p

        m.n_experts, m.top_k, m.hidden = E, self.top_k, D
        m.norm_topk, m.act = int(self.norm_topk), (ACTIVATIONS if self.plain else GLU_ACTIVATIONS)[self.act]
        m.router = ffi.NULL if self.ext_logits else self.router.c
        m.gate = ffi.NULL if self.plain else tensors(self.gate)
        m.up, m.down = tensors(self.up), tensors(self.down)
        m.plain = int(self.plain)
        if self.router_b is not None:
            m.router_b = self.router_b.p
        m.scoring = {"softmax": 0, "sigmoid": 1, "sparsemixer": 2, "sqrtsoftplus": 3}[self.scoring]
        m.scale_input, m.swiglu_limit = int(self.scale_input), self.swiglu_limit
        if self.tid2eid is not None:
            m.forced = arr((cap, self.top_k), np.int32)
            self._forced = keep[-1]
        m.jitter_eps = self.jitter_eps
        if self.sel_bias is not None:
            m.sel_bias = self.sel_bias.p
        m.bias_logits = int(self.bias_logits)
        if self.post_norm is not None:
            m.post_norm = self.post_norm.p
        if self.sh_post_norm is not None:
            m.sh_post_norm = self.sh_post_norm.p
        m.post_norm_eps = self.post_norm_eps
        m.n_group, m.topk_group = self.n_group, self.topk_group
        m.group_score = {"max": 0, "top2_sum": 1}[self.group_score]
        m.routed_scale = self.routed_scale if self.routed_scale != 1.0 else 0.0
        m.norm_eps = self.norm_eps
        m.n_zero = self.n_zero
        m.logit_softcap, m.ext_logits, m.zero_skip = self.logit_softcap, int(self.ext_logits), int(self.zero_skip)
        m.gate_softcap, m.up_softcap = self.gate_softcap, self.up_softcap
        m.group_fill_zero, m.limit_after_act = int(self.group_fill_zero), int(self.limit_after_act)
        m.sh_limit_own, m.sh_swiglu_limit = int(self.sh_swiglu_limit is not None), self.sh_swiglu_limit or 0.0

        def vecs(vs):
            p = ffi.new("const float *[]", [v.p for v in vs])
            keep.append(p)
            return p

        if self.gate_b is not None:
            m.gate_b, m.up_b, m.down_b = vecs(self.gate_b), vecs(self.up_b), vecs(self.down_b)
        if self.shared is not None:
            m.sh_gate, m.sh_up, m.sh_down = (ffi.NULL if w is None else w.c for w in self.shared)
            m.sh_router = self.shared_gate.c if self.shared_gate is not None else ffi.NULL
            if self.shared_b is not None:
                m.sh_gate_b, m.sh_up_b, m.sh_down_b = (v.p for v in self.shared_b)
        m.cap = cap
        m.logits, m.sel, m.wt = arr((cap, E)), arr((cap, self.top_k), np.int32), arr((cap, self.top_k))
        m.rows, m.rw = arr(cap * self.top_k, np.int32), arr(cap * self.top_k)
        m.xg, m.yo, m.out = arr((cap * self.top_k, D)), arr((cap * self.top_k, D)), arr((cap, D))
        m.g, m.u = arr((cap * self.top_k, F)), arr((cap * self.top_k, F))
        self._c, self._cap, self._keep = m, cap, keep
        return m

    def last_routing(self, T: int) -> np.ndarray:
        """The experts the last step chose for its T tokens, [T, top_k] int, sorted per row (a copy). With the
        sparsemixer, each row goes on with its masks (sparsemixer_masks, 0 / 1): a mask decision that flips changes
        a weight without changing the experts."""
        if self._c is None or T > self._cap:
            raise ValueError(f"no routing of {T} tokens recorded")
        sel = np.frombuffer(ffi.buffer(self._c.sel, T * self.top_k * 4), np.int32).reshape(T, self.top_k)
        if self.scoring != "sparsemixer":
            return np.sort(sel, axis=1)
        E = len(self.gate)
        logits = np.frombuffer(ffi.buffer(self._c.logits, T * E * 4), np.float32).reshape(T, E)
        masks = sparsemixer_masks(logits, sel, self.jitter_eps).reshape(T, -1).astype(np.int32)
        return np.concatenate([np.sort(sel, axis=1), masks], axis=1)

    def route_tokens(self, ids) -> None:
        """Hash routing: the next step's tokens `ids` take the experts tid2eid[ids] (their scores still weigh them)."""
        ids = np.asarray(ids, np.int64)
        if self.tid2eid is None:
            raise ValueError("route_tokens: this block routes by its router, not by token")
        if ids.min(initial=0) < 0 or ids.max(initial=0) >= len(self.tid2eid):
            raise ValueError(f"route_tokens: a token id outside the hash table's {len(self.tid2eid)} rows")
        self.c(len(ids))
        self._forced[:len(ids)] = self.tid2eid[ids]

    def run(self, x, T: int, y, accumulate: bool = False) -> int:
        """y = this block of x (T rows at the pointer x; y likewise), one C call (the decoder's per-op oracle)."""
        return lib.pt_moe_run(self.c(T), x, T, y, int(accumulate))


def sparsemixer_masks(logits: np.ndarray, sel: np.ndarray, eps: float) -> np.ndarray:
    """PhiMoE's sparsemixer masks, [T, k, E] bool, for router logits [T, E] and the experts chosen [T, k] (in the
    order chosen): the experts each choice's softmax weight is taken over, those not chosen before it whose
    (m - l) / max(|l|, m) <= 2 eps, m the chosen one's logit (kernels/moe.c's rule, in the logits' precision)."""
    T, k = sel.shape
    rows = np.arange(T)
    out = np.zeros((T, k, logits.shape[1]), bool)
    for j in range(k):
        left = np.ones(logits.shape, bool)
        for q in range(j):
            left[rows, sel[:, q]] = False
        m = logits[rows, sel[:, j]][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            out[:, j] = left & ~((m - logits) / np.maximum(np.abs(logits), m) > logits.dtype.type(2 * eps))
    return out


def moe_weights(t, p: str, cfg, *, n_experts: int, top_k: int, inter: int, norm_topk: bool, router: str,
                experts: str, names=("gate_proj", "up_proj", "down_proj"), shared: str | None = None,
                shared_inter: int | None = None, shared_gate: str | None = None, act: str = "silu",
                bias: bool = False) -> Moe:
    """A Moe from a checkpoint's tensors under the layer prefix `p`: `router` + ".weight", `experts` + ".{e}." +
    each of `names` (gate, up, down) + ".weight", and a shared expert under `shared` (Qwen2-MoE); with `bias`, the
    router's and each expert matrix's ".bias" too (gpt-oss)."""
    D = cfg.hidden_size
    g, u, dn = names
    gate = [t.weight(f"{p}{experts}.{e}.{g}.weight", (inter, D)) for e in range(n_experts)]
    up = [t.weight(f"{p}{experts}.{e}.{u}.weight", (inter, D)) for e in range(n_experts)]
    down = [t.weight(f"{p}{experts}.{e}.{dn}.weight", (D, inter)) for e in range(n_experts)]
    sh = sg = None
    if shared is not None:
        sh = tuple(t.weight(f"{p}{shared}.{n}.weight", shape) for n, shape in
                   (("gate_proj", (shared_inter, D)), ("up_proj", (shared_inter, D)), ("down_proj", (D, shared_inter))))
        if shared_gate is not None:
            sg = t.float_weight(f"{p}{shared_gate}.weight", (1, D))
    biases = {}
    if bias:
        biases = {"router_b": t.vec(f"{p}{router}.bias", (n_experts,)),
                  "gate_b": [t.vec(f"{p}{experts}.{e}.{g}.bias", (inter,)) for e in range(n_experts)],
                  "up_b": [t.vec(f"{p}{experts}.{e}.{u}.bias", (inter,)) for e in range(n_experts)],
                  "down_b": [t.vec(f"{p}{experts}.{e}.{dn}.bias", (D,)) for e in range(n_experts)]}
    return Moe(t.float_weight(f"{p}{router}.weight", (n_experts, D)), gate, up, down, top_k, norm_topk, act, sh, sg,
               **biases)


def split_experts(ckpt, p: str, n_experts: int, inter: int, hidden: int, experts: str = "mlp.experts",
                  fused: str | None = None, down: str | None = None, transposed: bool = False,
                  held: dict | None = None) -> dict:
    """hf_tensors entries of each expert's gate / up / down matrix under `p + experts + ".{e}."`, read from
    transformers 5's 3-D `gate_up_proj` [E, 2 inter, hidden] ([gate; up] rows) and `down_proj` [E, hidden, inter]
    (the layout it saves a model's experts in when its conversion mapping does not split them: ZAYA, MiniMax-M3), or
    from the 3-D tensors named `fused` / `down`; with `transposed` laid out [in, out]: [E, hidden, 2 inter] (gate
    columns, then up) and [E, inter, hidden] (Aria's). Each 3-D tensor is read once and kept in `held` (one dict for
    every layer's call: only the last tensor read stays) while its experts are handed out."""
    fused, down = fused or f"{p}{experts}.gate_up_proj", down or f"{p}{experts}.down_proj"
    held = {} if held is None else held

    def part(src, e, lo=0, hi=None):
        def make():
            if src not in held:
                held.clear()
                held[src] = ckpt.f32(src)
            a = held[src][e]
            return np.ascontiguousarray((a.T if transposed else a)[lo:hi])
        return make

    out = {}
    for e in range(n_experts):
        x = f"{p}{experts}.{e}."
        out[x + "gate_proj.weight"] = ((inter, hidden), part(fused, e, 0, inter), [fused])
        out[x + "up_proj.weight"] = ((inter, hidden), part(fused, e, inter, 2 * inter), [fused])
        out[x + "down_proj.weight"] = ((hidden, inter), part(down, e), [down])
    return out
