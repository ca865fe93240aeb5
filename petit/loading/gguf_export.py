"""Writing a loaded model as a GGUF file (`petit convert MODEL -o X.gguf`), the inverse of gguf.py / gguf_archs.py:
llama.cpp's architecture name, hyperparameter keys and tensor names; q / k rows permuted for its adjacent-pair RoPE
where llama.cpp's converter permutes them; Gemma's norms stored as 1 + w; fused matrices (Phi-3's qkv and gate-up,
GPT-2's and GPT-NeoX's qkv) as one tensor of their row blocks; the tokenizer and chat template in the metadata.
Block types are written as the model holds them (GGML's layouts: q8_0, q4_0, q5_0, q4_k, q5_k, q6_k ...), so llama.cpp
runs exactly Petit's weights.

Nothing the format cannot say is dropped silently: the written file is loaded back (memory-mapped) and must give the
model's logits on a probe sequence; if not (a config field llama.cpp has no key for, such as Gemma 2's
query_pre_attn_scalar, or a RoPE scaling it does not run), the file is removed and the error says so.
"""
import os

import numpy as np

from petit.formats.gguf import write_gguf
from petit.loading.gguf_archs import ARCHS, MIXTRAL
from petit.loading.gguf_names import ONE_ROW
from petit.loading.gguf_moe import ALSO_READ as ALSO_READ_MOE
from petit.loading.gguf_ssm import ALSO_READ
from petit.loading.gguf_variants import ALSO_READ as ALSO_READ_VARIANTS

GGUF_TYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_0": "Q4_0", "q5_0": "Q5_0",
              "q4_k": "Q4_K", "q5_k": "Q5_K", "q6_k": "Q6_K", "q4_1": "Q4_1", "q5_1": "Q5_1", "q2_k": "Q2_K",
              "q3_k": "Q3_K", "iq4_nl": "IQ4_NL", "iq4_xs": "IQ4_XS"}
# llama.cpp's general.file_type (llama_ftype) for the weight type asked for
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "q5_0": 8, "q4_k": 14, "q5_k": 16, "q6_k": 18,
              "q4_k_m": 15, "bf16": 32}
# the architectures written: those whose files llama.cpp was seen to run to transformers' logits; the others in
# ARCHS are read only (llama.cpp wants some of them fused, e.g. falcon's and starcoder's attn_qkv, glm4's ffn_up)
WRITTEN = {"llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "phi2", "stablelm", "olmo2", "granite",
           "smollm3", "command-r", "cohere2", "starcoder2", "gptneox", "gpt2", "qwen3moe", "qwen2moe", "olmoe",
           "granitemoe"}
ARCH_OF = {a.model_type: name for name, a in ARCHS.items() if name in WRITTEN} | {
    "mistral": "llama", "mixtral": "llama", "granitemoeshared": "granitemoe"}  # llama.cpp's
READ_ONLY = ({a.model_type for name, a in ARCHS.items() if name not in WRITTEN} | ALSO_READ | ALSO_READ_MOE
             | ALSO_READ_VARIANTS)
_LAYERNORM_EPS = ("layer_norm_eps", "norm_epsilon", "layer_norm_epsilon")
FUSED = ("phi3", "gpt2", "gptneox")     # written with fused qkv (and Phi-3's gate-up): llama.cpp requires them so
# architectures whose llama.cpp loader requires output.weight even when tied
NEEDS_OUTPUT = ("olmo2", "stablelm", "qwen2moe", "olmoe")


def _arch(name: str, model_type: str):
    return MIXTRAL if model_type == "mixtral" else ARCHS[name]


def _n_experts(c: dict) -> int:
    return int(c.get("num_experts") or c.get("num_local_experts") or 0)


def _moe_hparams(name: str, c: dict, where: str) -> dict:
    """The expert keys, and a refusal for routing llama.cpp's architecture computes otherwise (it fixes whether the
    chosen weights are renormalised, and has every layer sparse)."""
    if not _n_experts(c):
        return {}
    fixed = {"qwen3moe": True, "qwen2moe": False, "olmoe": False}
    if name in fixed and bool(c.get("norm_topk_prob")) != fixed[name]:
        raise ValueError(f"{where}: llama.cpp's {name} {'always' if fixed[name] else 'never'} renormalises the chosen "
                         f"experts' weights, and this model has norm_topk_prob {c.get('norm_topk_prob')}: it would "
                         f"run differently")
    if c.get("mlp_only_layers") or c.get("decoder_sparse_step", 1) != 1:
        raise ValueError(f"{where}: llama.cpp's {name} has experts in every layer, and this model has dense layers "
                         f"(mlp_only_layers {c.get('mlp_only_layers')}, decoder_sparse_step "
                         f"{c.get('decoder_sparse_step')})")
    if name == "olmoe" and (c.get("num_key_value_heads") or c["num_attention_heads"]) != c["num_attention_heads"]:
        raise ValueError(f"{where}: llama.cpp's olmoe sizes the k norm for as many key / value heads as query heads, "
                         f"and this model has {c['num_key_value_heads']} of {c['num_attention_heads']}: it would "
                         f"refuse the file")
    k = {"expert_count": _n_experts(c), "expert_used_count": int(c["num_experts_per_tok"])}
    if c.get("moe_intermediate_size"):
        k["expert_feed_forward_length"] = int(c["moe_intermediate_size"])
    shared = c.get("shared_expert_intermediate_size") or c.get("shared_intermediate_size")
    if shared:
        k["expert_shared_feed_forward_length"] = int(shared)
    return k


def _hparams(name: str, c: dict, where: str) -> dict:
    """The `{arch}.*` keys of a config (Hugging Face names; gpt2's own spelled as the others first)."""
    c = dict(c)
    for gpt2, hf in (("n_embd", "hidden_size"), ("n_layer", "num_hidden_layers"), ("n_head", "num_attention_heads"),
                     ("n_positions", "max_position_embeddings"), ("n_inner", "intermediate_size")):
        if gpt2 in c:
            c[hf] = c.pop(gpt2)
    if c.get("intermediate_size") is None:
        c["intermediate_size"] = 4 * c["hidden_size"]
    heads = c["num_attention_heads"]
    head_dim = c.get("head_dim") or c["hidden_size"] // heads
    k = {"context_length": c["max_position_embeddings"], "embedding_length": c["hidden_size"],
         "feed_forward_length": c["intermediate_size"], "block_count": c["num_hidden_layers"],
         "attention.head_count": heads, "attention.head_count_kv": c.get("num_key_value_heads") or heads,
         "attention.key_length": head_dim, "attention.value_length": head_dim}
    if c.get("rope_theta") is not None:
        k["rope.freq_base"] = np.float32(c["rope_theta"])
    if c.get("rms_norm_eps") is not None:
        k["attention.layer_norm_rms_epsilon"] = np.float32(c["rms_norm_eps"])
    for key in _LAYERNORM_EPS:
        if c.get(key) is not None:
            k["attention.layer_norm_epsilon"] = np.float32(c[key])
    if c.get("partial_rotary_factor") not in (None, 1.0):
        k["rope.dimension_count"] = int(round(head_dim * c["partial_rotary_factor"]))
    s = c.get("rope_scaling") or {}
    kind = s.get("rope_type", s.get("type"))
    if kind == "linear":
        k.update({"rope.scaling.type": "linear", "rope.scaling.factor": np.float32(s["factor"])})
    elif kind == "yarn":
        k.update({"rope.scaling.type": "yarn", "rope.scaling.factor": np.float32(s["factor"]),
                  "rope.scaling.original_context_length": int(s["original_max_position_embeddings"])})
        for hf, key in (("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow"),
                        ("attention_factor", "attn_factor")):
            if s.get(hf) is not None:
                k[f"rope.scaling.{key}"] = np.float32(s[hf])
    elif kind not in (None, "default", "llama3", "longrope"):
        raise ValueError(f"{where}: RoPE scaling {kind!r} has no GGUF form llama.cpp runs (it runs linear, yarn, "
                         f"llama3 and longrope)")
    if c.get("sliding_window") and name in ("gemma2", "gemma3", "phi3", "cohere2"):
        k["attention.sliding_window"] = int(c["sliding_window"])
    for hf, key in (("attn_logit_softcapping", "attn_logit_softcapping"),
                    ("final_logit_softcapping", "final_logit_softcapping"), ("logit_scale", "logit_scale"),
                    ("embedding_multiplier", "embedding_scale"), ("residual_multiplier", "residual_scale"),
                    ("attention_multiplier", "attention.scale"), ("logits_scaling", "logit_scale")):
        if c.get(hf) is not None:
            k[key] = np.float32(c[hf])
    if name == "gemma3" and c.get("rope_local_base_freq") is not None:
        k["rope.freq_base_swa"] = np.float32(c["rope_local_base_freq"])
    if name == "phi3" and c.get("original_max_position_embeddings") is not None:
        k["rope.scaling.original_context_length"] = int(c["original_max_position_embeddings"])
    if kind == "longrope":       # llama.cpp takes 1 when the key is missing; transformers computes it
        old = c.get("original_max_position_embeddings") or s.get("original_max_position_embeddings")
        factor = c["max_position_embeddings"] / old if old else 1.0
        attn = s.get("attention_factor")
        if attn is None:
            attn = 1.0 if factor <= 1.0 else float(np.sqrt(1 + np.log(factor) / np.log(old)))
        k["rope.scaling.attn_factor"] = np.float32(attn)
    if name == "gptneox":
        k["use_parallel_residual"] = bool(c.get("use_parallel_residual", True))
    k.update(_moe_hparams(name, c, where))
    return {f"{name}.{key}": v for key, v in k.items()}


def _rope_tables(c: dict) -> dict:
    """Llama 3's and long-rope's scalings as llama.cpp stores them: per-frequency divisor tables (F32 tensors)."""
    s = c.get("rope_scaling") or {}
    kind = s.get("rope_type", s.get("type"))
    if kind == "longrope":
        return {"rope_factors_long.weight": np.asarray(s["long_factor"], np.float32),
                "rope_factors_short.weight": np.asarray(s["short_factor"], np.float32)}
    if kind != "llama3":
        return {}
    dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    inv = 1.0 / c["rope_theta"] ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    factor, lo, hi = s["factor"], s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
    old = s["original_max_position_embeddings"]
    wavelen = 2 * np.pi / inv
    smooth = np.clip((old / wavelen - lo) / (hi - lo), 0.0, 1.0)
    scaled = np.where(wavelen < old / hi, inv, np.where(wavelen > old / lo, inv / factor,
                                                       (1 - smooth) * inv / factor + smooth * inv))
    return {"rope_freqs.weight": (inv / scaled).astype(np.float32)}


def _names(arch, n_layers: int, fused: bool, n_experts: int = 0) -> dict:
    """Hugging Face name -> llama.cpp name, and the fused tensors' parts and stacked experts: {HF name: (GGUF name,
    part index)}. fused: write the architecture's fused tensors (else their parts under their own names, as phi2
    takes them)."""
    out = {}
    for gname, hf in arch.global_names.items():
        for kind in ("weight", "bias"):
            out[f"{hf}.{kind}"] = (f"{gname}.{kind}", None)
    for i in range(n_layers):
        prefix = arch.prefix.format(i)
        for gname, hf in arch.layer_names.items():
            for kind in ("weight", "bias"):
                out[f"{prefix}{hf}.{kind}"] = (f"blk.{i}.{gname}.{kind}", None)
        for gname, parts in arch.splits.items() if fused else ():
            for j, (hf, _) in enumerate(parts):
                for kind in ("weight", "bias"):
                    out[f"{prefix}{hf}.{kind}"] = (f"blk.{i}.{gname}.{kind}", j)
        for gname, hf in arch.experts.items():
            for e in range(n_experts):
                out[f"{prefix}{hf.format(e)}.weight"] = (f"blk.{i}.{gname}.weight", e)
    return out


def _pair_rows(raw: np.ndarray, heads: int, head_dim: int) -> np.ndarray:
    """q / k rows (whole rows, any type) reordered per head from rotate-half to adjacent pairs: row 2i + j of a head
    is its row j * head_dim / 2 + i, as llama.cpp's converter permutes them."""
    r = raw.reshape(heads, 2, head_dim // 2, -1)
    return np.ascontiguousarray(r.transpose(0, 2, 1, 3)).reshape(raw.shape)


def gguf_tensors(model, where: str) -> dict:
    """{GGUF name: (type, shape, bytes)} for the tensors the model runs on (model.tensors, as `petit convert` holds
    them: stored rows, not interleaved)."""
    c = model.config.to_dict()
    name = ARCH_OF[c["model_type"]]
    arch = _arch(name, c["model_type"])
    n_layers = c.get("num_hidden_layers", c.get("n_layer"))
    names = _names(arch, n_layers, name in FUSED, _n_experts(c))
    heads = c.get("num_attention_heads", c.get("n_head"))
    head_dim = c.get("head_dim") or c.get("hidden_size", c.get("n_embd")) // heads
    kv = c.get("num_key_value_heads") or heads
    permute = arch.rope_pairs and not c.get("rope_interleaved")
    fused: dict[str, dict] = {}
    out = {}
    for hf, (dtype, shape, raw) in model.tensors.items():
        if hf not in names:
            raise ValueError(f"{where}: tensor {hf!r} has no name in llama.cpp's {name} architecture")
        gname, part = names[hf]
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(shape[0], -1) if len(shape) == 2 else \
            np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
        if arch.norm_shift and hf.endswith("norm.weight"):
            raw = (raw.view(np.float32) + np.float32(arch.norm_shift)).view(np.uint8)
        if permute and (".q_proj." in hf or ".k_proj." in hf):
            n = heads if ".q_proj." in hf else kv
            raw = _pair_rows(raw.reshape(n * head_dim, -1), n, head_dim).reshape(raw.shape)
        gtype = GGUF_TYPES[dtype]
        if gname.split(".")[-2] in ONE_ROW:          # a [1, n] matrix llama.cpp holds as a vector
            shape = (shape[-1],)
            raw = raw.reshape(-1)
        if part is None:
            out[gname] = (gtype, tuple(shape), raw)
        else:
            fused.setdefault(gname, {})[part] = (gtype, tuple(shape), raw)
            out.setdefault(gname, None)          # keeps the file's tensor order
    for gname, parts in fused.items():
        stem = gname.split(".")[2]
        stacked = stem in arch.experts
        n_parts = _n_experts(c) if stacked else len(arch.splits[stem])
        if sorted(parts) != list(range(n_parts)) or len({p[0] for p in parts.values()}) != 1:
            raise ValueError(f"{where}: the parts of {gname} are not all there in one type")
        rows = [parts[j] for j in range(n_parts)]
        shape = (n_parts,) + rows[0][1] if stacked else (sum(s[0] for _, s, _ in rows),) + rows[0][1][1:]
        out[gname] = (rows[0][0], shape, np.concatenate([r for _, _, r in rows], axis=0))
    if name in NEEDS_OUTPUT and "output.weight" not in out:     # tied: the embedding again, as its head
        out["output.weight"] = out["token_embd.weight"]
    for tname, table in _rope_tables(c).items():
        out[tname] = ("F32", table.shape, table.view(np.uint8))
    return out


def gguf_metadata(model, where: str, weights: str | None, title: str) -> dict:
    c = model.config.to_dict()
    name = ARCH_OF.get(c["model_type"])
    if name is None and c["model_type"] in READ_ONLY:
        raise ValueError(f"{where}: Petit reads GGUF files of the {c['model_type']} family but does not write them "
                         f"yet (it writes the {', '.join(sorted(ARCH_OF))} families)")
    if name is None:
        raise ValueError(f"{where}: Petit writes GGUF for the {', '.join(sorted(ARCH_OF))} families, not "
                         f"{c['model_type']!r}")
    if name == "command-r" and c.get("use_qk_norm") and c["num_hidden_layers"] < 64:
        raise ValueError(f"{where}: llama.cpp reads Command-R's q / k norms only in models of 64 layers or more "
                         f"(Command R+), and this one has {c['num_hidden_layers']}: it would refuse the file")
    meta = {"general.architecture": name, "general.name": title, "general.quantization_version": np.uint32(2),
            **_hparams(name, c, where)}
    if weights in FILE_TYPES:
        meta["general.file_type"] = np.uint32(FILE_TYPES[weights])
    if model.tokenizer is not None:
        from petit.hf.gguf_tokenizer_export import tokenizer_metadata
        meta.update(tokenizer_metadata(model.tokenizer, where, model.vocab_size))
    template = model.metadata.get("chat_template")
    if isinstance(template, str):
        meta["tokenizer.chat_template"] = template
    return meta


def write_model_gguf(model, output: str, where: str, weights: str | None = None, name: str | None = None) -> None:
    """Write `model` (loaded with repack=False) as the GGUF file `output`, then check it gives the same logits.

    Raises:
        ValueError: a family, tensor or setting GGUF cannot hold, or a written file that reads back differently
            (then removed); OSError: the file cannot be written.
    """
    title = name or os.path.splitext(os.path.basename(os.path.abspath(where)))[0]
    meta = gguf_metadata(model, where, weights, title)
    write_gguf(output, meta, gguf_tensors(model, where))
    try:
        _check_written(model, output, where)
    except BaseException:
        os.unlink(output)
        raise


def _check_written(model, output: str, where: str) -> None:
    from petit.loading.gguf import load_gguf
    ids = [int(i) % model.vocab_size for i in np.random.default_rng(0).integers(0, model.vocab_size, 12)]
    # read back with the q / k rows in the model's own order (llama.cpp's adjacent-pair permutation undone): the same
    # rows in the same order compute the same bits, where the permuted ones would sum each head's dot products in
    # another order and an int8 activation rounding could turn that ulp into 0.003 of the logit range
    back = load_gguf(output, None, False if model.tokenizer is None else None, repack=False,
                     kquants=set(GGUF_TYPES.values()) - {"F32", "F16", "BF16", "Q8_0", "Q4_0"},
                     rope_halves=not model.config.to_dict().get("rope_interleaved"))
    try:
        want, got = model.logits(ids), back.logits(ids)
        diff = _config_diff(model.config.to_dict(), back.config.to_dict())
    finally:
        back.close()
    scale = float(np.ptp(want)) or 1.0
    err = float(np.abs(want - got).max()) / scale
    if not err <= 1e-4:
        raise ValueError(f"{where}: a GGUF file cannot hold this {model.config.model_type} model exactly: read back "
                         f"as llama.cpp reads it, its logits differ by {err:.2g} of their range"
                         + (f" ({diff})" if diff else ""))


def _config_diff(want: dict, got: dict) -> str:
    """The config fields that differ, as "field: X here, Y as read from GGUF" (RoPE's pair layout aside)."""
    def same(a, b):
        if isinstance(a, float) and isinstance(b, float):
            return abs(a - b) <= 1e-6 * max(abs(a), abs(b))      # float32 in the file
        return a == b
    keys = [k for k in want if k not in ("rope_interleaved", "model_type") and not same(want.get(k), got.get(k))]
    return "; ".join(f"{k}: {want[k]!r:.40} here, {got.get(k)!r:.40} as read from GGUF" for k in keys)
