"""What the reference forward needs to know about a model, as plain data: a family module (trainer/reference/families)
reads the config and the tensor names of its family into a `ModelSpec`; trainer/reference/forward.py runs it.
Names are tensor names in the file; None means "absent"."""
from dataclasses import dataclass, field


@dataclass
class NormSpec:
    """RMSNorm (`kind` "rms": x / sqrt(mean(x^2) + eps) * w) or LayerNorm ("layer": (x - mean) / sqrt(var + eps) * w
    + b). `weight` may be [n] or, one row per head, [heads, n]; `add` is added to the weight (Gemma's 1 + w)."""
    kind: str
    eps: float
    weight: str | None
    bias: str | None = None
    add: float = 0.0
    gate: tuple | None = None            # issue 36, fam36m: (down, up): y * sigmoid(up silu(down y)) after (A.X-K2)


@dataclass
class RopeSpec:
    """Rotate the first `dim` values of each head of q and k by position: pairs (i, i + dim/2), or (2i, 2i+1) when
    `interleaved`; `freqs(seq_len)` -> (inverse frequencies [dim/2], attention factor multiplying cos and sin)."""
    dim: int
    freqs: object
    interleaved: bool = False


@dataclass
class MoeSpec:
    """Routed experts: softmax of h router^T, the top_k largest (renormalised to sum 1 with norm_topk), each chosen
    expert's act(gate h) * (up h) -> down times its weight, summed; then a shared expert over every token (times
    sigmoid(h shared_gate^T) when given)."""
    router: str
    experts: list                        # [(gate, up, down)] names, one per expert
    top_k: int
    norm_topk: bool
    shared: tuple | None = None
    shared_gate: str | None = None
    router_b: str | None = None          # a router bias (gpt-oss)
    biases: list | None = None           # [(gate_b, up_b, down_b)] names, one per expert (gpt-oss)
    act: str | None = None               # the experts' activation when not the model's (gpt-oss: swiglu_oai)
    scoring: str = "softmax"             # or "sigmoid" of each logit (Llama 4, DeepSeek-V3), "sparsemixer" (PhiMoE)
    sel_bias: str | None = None          # added to the scores for the choice only (DeepSeek-V3)
    n_group: int = 0                     # > 1: only experts of the topk_group best groups (DeepSeek)
    topk_group: int = 0
    group_score: str = "max"             # a group's best score, or "top2_sum" of its best two (DeepSeek-V3)
    routed_scale: float = 1.0
    scale_input: bool = False            # the weight scales the expert's input, not its output (Llama 4)
    shared_b: tuple | None = None        # the shared expert's (gate, up, down) biases (ERNIE 4.5)
    norm_eps: float = 0.0                # with norm_topk: over (the sum + norm_eps) (LFM2-MoE, issue 30's moe_b group)
    jitter_eps: float = 0.0              # issue 30, moe_a: scoring "sparsemixer" (PhiMoE)'s relative threshold
    plain: bool = False                  # experts (and the shared one) act(up h) -> down, no gate (Nemotron-H)
    n_zero: int = 0                      # issue 30, longcat: zero-computation experts after the real ones (the
                                         # router's last rows): a token choosing one adds h times its weight
    bias_logits: bool = False            # issue 36, fam36e: the choice on the logits + sel_bias, not on the scores
                                         # + sel_bias (Kolibri 1); the weights stay the chosen scores
    post_norm: str | None = None         # issue 36, fam36h: [experts, hidden]: each chosen expert's output RMS-normed
    sh_post_norm: str | None = None      # with its row before its weight (Ergo); [hidden]: the shared expert's
    post_norm_eps: float = 0.0
    logit_softcap: float = 0.0           # issue 36, fam36g: > 0: the logits cap tanh(l / cap) first (Laguna)
    group_fill_zero: bool = False        # issue 36, fam36m: the other groups' experts score 0, not out (A.X-K2)
    swiglu_limit: float = 0.0            # issue 36, fam36m: > 0: the experts' gate <= it and up in [-it, it] before
    limit_after_act: bool = False        # the activation, or act(gate) <= it after it (Ling 3)
    sh_swiglu_limit: float = 0.0         # the shared expert's own (0: none)


@dataclass
class LayerSpec:
    q: str
    k: str
    v: str
    o: str
    up: str | None = None                # None only with moe
    down: str | None = None
    gate: str | None = None              # None: a plain MLP act(up x + b) -> down
    moe: MoeSpec | None = None           # routed experts in place of the MLP
    q_b: str | None = None
    k_b: str | None = None
    v_b: str | None = None
    o_b: str | None = None
    gate_b: str | None = None
    up_b: str | None = None
    down_b: str | None = None
    attn_norm: NormSpec | None = None
    mlp_norm: NormSpec | None = None     # parallel block: None means the MLP reads attn_norm's output
    post_attn_norm: NormSpec | None = None
    post_mlp_norm: NormSpec | None = None
    q_norm: NormSpec | None = None
    k_norm: NormSpec | None = None
    qk_norm_over_heads: bool = True      # False: the q/k norms span the whole projection (OLMo 2)
    rope: RopeSpec | None = None
    window: int = 0                      # 0: full causal attention; W: a query sees itself and the W - 1 before
    sinks: str | None = None             # [heads] attention sinks (gpt-oss): a softmax term whose share is dropped
    chunk: int = 0                       # > 0: a query sees only the keys of its own chunk (Llama 4)
    temperature: tuple | None = None     # (floor, a): query p's scores x (1 + a ln(1 + floor((p + 1) / floor)));
                                         # (f, a, 2): x exp(a ln(1 + (p + 1) / f)) (Beam, issue 36 fam36i)
    mla: "MlaSpec | None" = None         # multi-head latent attention in place of q / k / v (DeepSeek)
    mamba: "MambaSpec | None" = None     # a Mamba mixer in place of attention and MLP
    mamba2: "Mamba2Spec | None" = None   # a Mamba-2 mixer in place of attention and MLP
    short_conv: "ShortConvSpec | None" = None   # LFM2's gated short convolution in place of attention (an MLP follows)
    clip: float = 0.0                    # > 0: q, k, v clamped to [-clip, clip] after their biases (OLMo)
    norm_after_rope: bool = False        # the q / k norms act on the rotated q and k (Hunyuan)
    xielu: tuple | None = None           # the plain MLP's activation is xIELU of these (alpha_p, alpha_n, beta, eps)
    xielu_bf16: bool = True              # xIELU's a_p, a_n rounded to bfloat16 (transformers); False: not (llama.cpp)
    resid_attn_norm: NormSpec | None = None    # post-LN: the residual stream normed after the attention's add (OPT)
    resid_mlp_norm: NormSpec | None = None     # and after the MLP's
    alibi: list | None = None            # [H] ALiBi slopes: slope_h * (j - i) added to the scores
    o_norm: NormSpec | None = None       # a norm of o_proj's input (BitNet's attn_sub_norm)
    attn_gate: str | None = None         # the heads' outputs times sigmoid(x attn_gate^T) before o_proj (Qwen3-Next)
    deltanet: "DeltaNetSpec | None" = None   # Gated DeltaNet linear attention in place of attention (Qwen3-Next)
    down_norm: NormSpec | None = None    # a norm of down_proj's input (BitNet's ffn_sub_norm)
    shared: "SharedSpec | None" = None   # issue 30, the hybrid group: Zamba's shared block before the mixer
    rwkv6: "Rwkv6Spec | None" = None     # issue 30, recur: a whole RWKV-6 block (time and channel mixing)
    rwkv7: "Rwkv7Spec | None" = None     # issue 30, recur: a whole RWKV-7 block
    rwkv4: "Rwkv4Spec | None" = None     # issue 30, recur: a whole RWKV-4 block
    mlstm: "MlstmSpec | None" = None     # issue 36, fam36n: xLSTM's mLSTM layer in place of attention (an MLP follows)
    rglru: "RglruSpec | None" = None     # issue 30, recur: Griffin's recurrent block (an MLP follows)
    resid_alpha: tuple = (1.0, 1.0)     # issue 30, the hybrid group: MiniMax's x = alpha x + sublayer (attn, mlp)
    lightning: "LightningSpec | None" = None   # issue 30, the hybrid group: MiniMax's lightning attention
    # issue 30, the jetmoe group: JetMoE's mixture of attention heads: the heads (h, e) of expert e weighed by the
    # softmax of the token's top moa_top_k logits of this router (0 when e is not chosen) before o; with moe,
    # down_b is the MLP's output bias added once after the experts
    moa_router: str | None = None
    moa_top_k: int = 0
    gla: "GlaSpec | None" = None         # issue 30, the ggufx group: QRWKV6's time mixing (an MLP follows)
    diff: "DiffSpec | None" = None       # issue 36, fam36d: DiffLlama's differential attention
    # issue 36, fam36d: SmallDoge's dynamic mask, (A, dt_proj, its bias or None): key j of kv head h adds
    # exp(A_h softplus(dt_proj v_j + b)_h) to every score; resid_alpha may then name [hidden] tensors (per channel)
    key_bias: tuple | None = None
    # issue 36, fam36i: MiniMax-M3's block-sparse attention: the indexer choosing each query's key blocks
    block_sparse: "BlockSparseSpec | None" = None
    # issue 36, the q4exp group: a family's own choice of the positions each query head sees (Qwen4-Exp's QSA):
    # keep(forward, layer, h, heads) -> [heads, T, T] bool
    keep: object = None
    # issue 36, fam36i: Beam: a [heads] bias of attn_gate x, one a head; each sublayer's output times these before
    # its add (resid_alpha the stream's factor): h / sqrt(i) + r sqrt((i - 1) / i)
    attn_gate_b: str | None = None
    branch_scale: tuple = (1.0, 1.0)
    # issue 36, fam36g: the layer's query heads when not the model's (Laguna); attn_gate's activation softplus, not
    # sigmoid, and the values each gate scales (1, or head_dim: one gate a head)
    heads: int = 0
    attn_gate_softplus: bool = False
    attn_gate_width: int = 1


@dataclass
class DiffSpec:
    """DiffLlama's attention: o1 / o2 = each head's softmax attention over the first / last half of the kv heads'
    values (each half repeated to every kv head); pair p < H/2 of [o1_h, o2_h] (2 hd values) is z = pair p - lambda
    pair p + H/2, lambda = exp(q1 . k1) - exp(q2 . k2) + init (the four [hd] vectors named), then z / rms(z) (eps,
    no weight) times 1 - init; o reads the pairs side by side."""
    q1: str
    k1: str
    q2: str
    k2: str
    init: float
    eps: float


@dataclass
class BlockSparseSpec:
    """MiniMax-M3's lightning indexer (issue 36, fam36i): iq = q_norm(wq x) [heads, dim], ik = k_norm(wk x) [dim]
    (norms over each head), both rotated by the layer's RoPE; block b (positions b * block ..) of the query at p
    scores max over its positions s <= p of iq_h . ik_s; the query's block and the local - 1 before it are always
    chosen, then the best others up to top_k; query head g reads indexer head g // (H / heads)'s blocks only."""
    wq: str
    wk: str
    q_norm: NormSpec
    k_norm: NormSpec
    heads: int
    dim: int
    block: int
    top_k: int
    local: int


@dataclass
class MambaSpec:
    """A Mamba mixer: xz = in_proj x (x, then z); u = silu(causal depthwise conv1d(x) + bias); dt, B, C = x_proj u
    (split dt_rank, d_state, d_state; each RMS-normed without weight when inner_eps is set: Falcon-Mamba); dt =
    softplus(dt_proj dt + bias); s = exp(dt A) s + dt B u with A = -exp(A_log); y = s C + D u; out_proj(y silu(z))."""
    in_proj: str
    conv: str
    conv_b: str | None
    x_proj: str
    dt_proj: str
    dt_b: str
    A_log: str
    D: str
    out_proj: str
    dt_rank: int
    inner_eps: float | None = None
    inner_w: tuple | None = None         # the dt, B and C norms' weights (Jamba; Falcon-Mamba's have none)
    heads: int = 1                       # Zamba: di / heads channels a head, each head its own block of x_proj and
    # dt_proj (block-diagonal in the file), so its own dt, B and C


@dataclass
class MlaSpec:
    """DeepSeek's latent attention, computed the plain way (keys and values decompressed per head): q = [q_nope ;
    q_pe] from x (or from RMSNorm(q_a x)), latent c = RMSNorm(kv_c x), k_pe = kv_pe x shared by the heads; head h's
    key [c k_absorb_h ; rope(k_pe)] and value v_absorb_h c; o_proj over the heads' outputs."""
    q_nope: str
    q_pe: str
    kv_c: str
    kv_pe: str
    kv_norm: NormSpec
    k_absorb: list                       # per head W_uk_h^T [rank, nope]
    v_absorb: list                       # per head W_uv_h [v, rank]
    q_a: str | None = None
    q_a_norm: NormSpec | None = None
    dsa: "DsaSpec | None" = None         # DeepSeek Sparse Attention's indexer (DeepSeek-V3.2, GLM-5), or None
    q_scale: float = 1.0                 # issue 30, longcat: the query times q_scale (LongCat-Flash's
    kv_scale: float = 1.0                # sqrt(hidden / q_lora_rank)), the normed latent times kv_scale
    # issue 36, fam36k (Dots 3): the layer's softmax scale (None: the model's), a norm of k_pe before RoPE
    scale: float | None = None
    k_pe_norm: NormSpec | None = None
    # issue 36, fam36m: q_cat: the query's matrices read [q_a_norm(q_a x) ; q_a x] (A.X-K2); gate (fam36k, fam36m):
    # the heads' outputs times sigmoid(gate . in) before o_proj, in = x (gate_x) or the query's input (A.X-K2), one
    # gate a head (its rows: the heads) or a value (its rows: every value)
    q_cat: bool = False
    gate: str | None = None
    gate_x: bool = True


@dataclass
class DsaSpec:
    """DeepSeek Sparse Attention (the mla group of issue 30): the indexer's q = wq_b(RMSNorm(q_a x)) [heads, dim],
    k = LayerNorm(wk x) [dim], both rotated on their first rope values (`interleaved`: adjacent pairs, else halves),
    head weights w = weights_proj x; the query at p attends only to the top_k positions s <= p of largest
    sum_h w_h heads^-1/2 relu(dim^-1/2 q_h . k_s) (all of them when p < top_k). `wq_b` None: a shared layer, which
    reuses the choice of the last layer that ran an indexer (GLM-5)."""
    wq_b: str | None
    wk: str | None
    k_norm: NormSpec | None
    w_proj: str | None
    heads: int
    dim: int
    top_k: int
    interleaved: bool


@dataclass
class ModelSpec:
    family: str
    heads: int
    kv_heads: int
    head_dim: int
    embed: str
    head: str
    final_norm: NormSpec
    layers: list = field(default_factory=list)
    act: str = "silu"                    # silu, gelu (erf), gelu_tanh, relu
    parallel: bool = False               # x + attn(n1(x)) + mlp(n2(x))
    attn_scale: float | None = None      # None: head_dim ** -0.5
    attn_softcap: float = 0.0
    embed_scale: float = 1.0
    residual_scale: float = 1.0
    pos_embed: str | None = None         # learned absolute positions (GPT-2)
    head_b: str | None = None
    logit_scale: float = 1.0
    logit_softcap: float = 0.0
    embed_norm: NormSpec | None = None   # a norm of the embeddings before the first block (BLOOM)
    pos_offset: int = 0                  # position p reads row p + pos_offset of pos_embed (OPT: 2)
    # issue 36, fam36j: (W, its bias or None, activation, NormSpec): the final norm's output goes through
    # norm(act(x W^T + b)) before the head (ModernBERT's prediction head)
    head_dense: tuple | None = None
    # issue 30, the gemma group: a family's own forward(Forward, ids) -> logits when its blocks do not fit LayerSpec
    # (Gemma 3n's streams), and the tensor names it reads
    forward: object = None
    extra_names: tuple = ()


@dataclass
class Mamba2Spec:
    """A Mamba-2 mixer: z, xBC, dt = in_proj x; xBC = silu(causal depthwise conv1d(xBC) + bias), split into x [H, P],
    B and C [G, N]; dt = clamp(softplus(dt + dt_bias), limits); per head S = exp(dt A) S + dt x B^T with A =
    -exp(A_log), y = S C + D x; out_proj(RMSNorm(y silu(z)) * norm_w), the norm over all channels (transformers)."""
    in_proj: str
    conv: str
    conv_b: str | None
    dt_bias: str
    A_log: str
    D: str
    norm: str
    out_proj: str
    n_heads: int
    n_groups: int
    state: int
    eps: float
    dt_limit: tuple = (0.0, float("inf"))
    norm_groups: int = 1                 # Falcon-H1: the gated norm per group of channels
    norm_mode: str = "gate_first"        # or "norm_first" (norm_before_gate), "none" (no norm: y silu(z))


@dataclass
class DeltaNetSpec:
    """Qwen3-Next's Gated DeltaNet: in_proj gives q, k [nk, dk], v, z [nv, dv], b, a [nv] (rows in that order); a
    causal conv of q | k | v (no bias) and silu; q, k l2-normed (eps 1e-6 in the sum), q / sqrt(dk); value head h reads
    key head h // (nv / nk); per head S = S exp(g), S += k (beta (v - S^T k))^T, o = S^T q with beta = sigmoid(b),
    g = -exp(A_log) softplus(a + dt_bias); o RMS-normed per head with `norm` (eps), times silu(z); out_proj."""
    in_proj: str
    conv: str
    dt_bias: str
    A_log: str
    norm: str
    out_proj: str
    n_k: int
    n_v: int
    dk: int
    dv: int
    eps: float
    beta_scale: float = 1.0              # issue 30, the hybrid group: OLMo Hybrid's allow_neg_eigval: beta x 2
    kda: bool = False                    # issue 30, the hybrid group: Kimi Delta Attention (a decay per key channel
                                         # from a [nv * dk] gate f in place of a, dt_bias [nv * dk]; a sigmoid gate)
    kda_lower_bound: float = 0.0         # issue 36, fam36m: < 0: g = it sigmoid(exp(A_log) (f + dt_bias)) (Ling 3)


@dataclass
class ShortConvSpec:
    """LFM2's short convolution: B, C, x = in_proj h (in that order); v = B x; a causal depthwise conv of v (no bias,
    no activation); out_proj(C conv)."""
    in_proj: str
    conv: str
    out_proj: str


@dataclass
class SharedSpec:
    """Issue 30, the hybrid group: one use of Zamba2's shared transformer block. c = in_norm([x | embeddings]);
    q, k, v = W c (+ B A c with the use's adapters); attention (RoPE when rope), o_proj; y = ff_norm(o); gate, up =
    W y (+ B A y); down(act(gate) * up); then the use's linear. The layer's mixer reads its norm of x + that."""
    in_norm: "NormSpec"
    q: str
    k: str
    v: str
    o: str
    ff_norm: "NormSpec"
    gate: str
    up: str
    down: str
    linear: str
    scale: float
    rope: "RopeSpec | None" = None
    adapters: dict = field(default_factory=dict)     # {"q": (A, B), "k": ..., "v": ..., "gate": (A, B), "up": (A, B)}


@dataclass
class RglruSpec:
    """Griffin's recurrent block (RecurrentGemma), issue 30's recur group: x, y = in_proj h split in two (linear_x
    over linear_y) plus their biases; y = gelu_tanh(y); u = causal depthwise conv1d(x) + conv_b (no activation); per
    head of bw channels i = sigmoid(u_h wx_h + bx_h), r = sigmoid(u_h wa_h + ba_h) (wx, wa [H, bw, bw], in x out);
    log a = -8 r softplus(c); h_t = a h_{t-1} + sqrt(1 - a^2) i u, with a = 0 and the sqrt 1 at position 0;
    out_proj(h y) + out_b."""
    in_proj: str
    x_b: str
    y_b: str
    conv: str
    conv_b: str
    wx: str
    bx: str
    wa: str
    ba: str
    c: str
    out_proj: str
    out_b: str
    heads: int


@dataclass
class LightningSpec:
    """Issue 30, the hybrid group: MiniMax's lightning attention as a `.petit` file stores it: in_proj rows
    [output_gate | v | k | q | (unused)] (Petit's join of qkv_proj's per-head [q_h | k_h | v_h] and output_gate);
    q, k, v = silu(.); per head S = exp(-slope_h) S + k_h^T v_h, o_h = q_h S; RMSNorm over all heads (eps) with `norm`,
    times sigmoid(gate); out_proj."""
    in_proj: str
    norm: str
    out_proj: str
    slopes: list
    n_heads: int
    head_dim: int
    eps: float


@dataclass
class Rwkv6Spec:
    """An RWKV-6 block as llama.cpp runs it (issue 30's recur group), the remote code's tensor layout: h = LN1(x),
    sx = shift(h) - h; m = tanh((h + sx maa_x) maa_w1) [5, E] times maa_w2 [5, E, D]; x_i = h + sx (maa_i + m_i) for
    w, k, v, r, g; r, k, v, g = silu(.) projections; w = exp(-exp(decay + tanh(x_w dec_w1) dec_w2)); per head
    y = r (u k v^T + S), S = w S + k v^T; group norm per head (gn_eps) * lnx + lnx_b, times g, output; x += scale
    out; h2 = LN2(x), token shift with cm_k / cm_r; x += scale sigmoid(C_r xr) (C_v relu(C_k xk)^2); x / 2 when
    halve. in_proj / out_proj name receptance / output (the matrices verify compares)."""
    in_proj: str
    k: str
    v: str
    g: str
    out_proj: str
    ck: str
    cv: str
    cr: str
    ln1: NormSpec
    ln2: NormSpec
    lnx_w: str
    lnx_b: str
    maa: tuple                           # maa_x, then w, k, v, r, g: [1, 1, D] each
    maa_w1: str
    maa_w2: str
    dec_w1: str
    dec_w2: str
    decay: str
    bonus: str
    cm_k: str
    cm_r: str
    heads: int
    gn_eps: float
    scale: float
    halve: bool


@dataclass
class Rwkv7Spec:
    """An RWKV-7 block as llama.cpp runs it (issue 30's recur group), fla-hub's tensor layout: h = LN1(x), token
    shift lerps x_i (r, w, k, v, a, g); w = exp(-e^-1/2 sigmoid(w0 + w2 tanh(w1 x_w))); v mixed with layer 0's
    (v_first) through sigmoid(v0 + v2 v1 x_v) from layer 1 on; g = g2 sigmoid(g1 x_g); a = sigmoid(a0 + a2 a1 x_a);
    kk = l2norm_heads(k k_k); k = k (1 + (a - 1) k_a); per head S = S diag(w) - S kk (kk a)^T + v k^T, y = S r;
    group norm (gn_eps) * lnx + lnx_b + v sum_head(r k r_k), times g, o_proj; channel mixing value(relu(key xk)^2).
    lora: {w|a|v|g: (down [R, D], up [D, R], bias [D] or None)}. in_proj / out_proj name r / o (verify's pairs)."""
    in_proj: str
    k: str
    v: str
    out_proj: str
    ck: str
    cv: str
    ln1: NormSpec
    ln2: NormSpec
    lnx_w: str
    lnx_b: str
    maa: tuple                           # x_r, x_w, x_k, x_v, x_a, x_g
    cm_k: str
    k_k: str
    k_a: str
    r_k: str
    lora: dict
    heads: int
    gn_eps: float
    first: bool


@dataclass
class Rwkv4Spec:
    """An RWKV-4 block (transformers' RwkvBlock, issue 30's recur group): h = LN1(x); x_i = h mix_i + shift(h)
    (1 - mix_i); k, v, sigmoid(r); wkv_t = (sum_{s<t} e^{(t-1-s) w + k_s} v_s + e^{u + k_t} v_t) / (the same without
    v) with w = -exp(time_decay), u = time_first; x += scale output(r wkv); channel mixing sigmoid(C_r xr)
    (C_v relu(C_k xk)^2); x / 2 when halve."""
    in_proj: str                         # key (verify compares it and out_proj)
    v: str
    r: str
    out_proj: str
    ck: str
    cv: str
    cr: str
    ln1: NormSpec
    ln2: NormSpec
    mix: tuple                           # time_mix_key, _value, _receptance
    cm: tuple                            # the channel mix's time_mix_key, _receptance
    decay: str
    first: str
    scale: float
    halve: bool


@dataclass
class MlstmSpec:
    """Issue 36, the fam36n group: xLSTM's mLSTM layer (transformers' xLSTMLayer) in its parallel form: q, k [H, dk],
    v, o [H, dv], i, f [H] = in_proj h + in_b (rows in that order); i, f soft-capped at cap (0: none); per head with
    B_t = sum_{s <= t} logsigmoid(f_s), logD_tj = B_t - B_j + i_j (j <= t), m_t = max(B_t, max_j logD_tj) (the
    stabilizer from a zero start), D = exp(logD - m), S = (q k^T / sqrt(dk)) D; y_t = S_t v / (max(|sum_j S_tj|,
    exp(-m_t)) + eps); a LayerNorm of each head's y (weight norm_w, norm_eps), times sigmoid(o); out_proj."""
    in_proj: str
    in_b: str
    norm_w: str
    out_proj: str
    heads: int
    dk: int
    dv: int
    cap: float
    eps: float
    norm_eps: float


@dataclass
class GlaSpec:
    """Issue 30, the ggufx group: QRWKV6's time mixing (llama.cpp's rwkv6qwen2) in the checkpoint's layout, on the
    layer's RMS-normed h: sx = shift(h) - h; m = tanh((h + sx maa_x) maa_w1) [5, E] times maa_w2 [5, E, D], blocks in
    the checkpoint's r, k, v, w, g order; x_c = h + sx (maa_c + m_c); r, k, v = in_proj / k / v (+ biases), k and v of
    kv_heads heads repeated to the heads in groups; g = sigmoid(g x_g); w = exp(-exp(decay + tanh(x_w dec_w1)
    dec_w2)); k = k (1 - w); per head S = w S + k v^T, y = head_size^-1/2 r S; out_proj (y g)."""
    in_proj: str
    k: str
    v: str
    g: str
    out_proj: str
    rb: str | None
    kb: str | None
    vb: str | None
    maa: tuple                           # maa_x, then w, k, v, r, g: [1, 1, D] each
    maa_w1: str
    maa_w2: str
    dec_w1: str
    dec_w2: str
    decay: str
    heads: int
    kv_heads: int
