"""What the qwenvl group's families share (issue 36: the Qwen-VL, GLM-4V, Cosmos 3 Omni and Omni thinkers' language
models): M-RoPE as a text-only prompt runs it, and the wrapper's config and checkpoint around the text model.

M-RoPE (Qwen2-VL's multimodal RoPE) splits a head's rotary frequencies into `mrope_section` parts taking their
position from the temporal, height and width axes of an image grid: Qwen2-VL and Qwen2.5-VL in consecutive blocks
(the rotary embedding's `recomposition_frequencies`: freq.split(mrope_section), the i-th from axis i % 3), Qwen3-VL
interleaved (frequency j from axis j % 3 up to 3 x its section). Every axis's position is the token's own for a
text-only prompt: with input_ids only, the wrapper's `compute_3d_position_ids` returns none (there is no image grid)
and the text model takes one arange expanded to the three axes (its rope_deltas are zeros in generation), so each
frequency turns by the token's position whichever axis it reads: plain RoPE (the fixtures check it on transformers,
other sections changing nothing). The sections are read and kept (`mrope_section`, in a converted file too) but
change nothing Petit computes; an image's positions are the tower's, which is not run, as are Qwen3-VL's DeepStack
residuals (added to the first layers' image positions only when the tower ran).

transformers' Qwen2VLTextConfig reads a rope type "mrope" (transformers 4's files) as "default".
"""
from petit.models.blocks import wrapper
from petit.models.blocks.moe import split_experts

TOWER = ("visual.", "model.visual.")
# the wrapper's keys the tower and the processor read (vision_token_id: Qwen2-VL's released files)
OWN_KEYS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id", "vision_token_id")


def read_mrope(d, interleaved: bool):
    """`d` with M-RoPE's keys taken out of rope_parameters / rope_scaling: mrope_section into the field
    `mrope_section` (a top-level one, a converted file's, kept), a rope type "mrope" read as "default", and (when
    the family reads it: Qwen3-VL) mrope_interleaved dropped; left in, it is reported as an unknown key."""
    if not isinstance(d, dict):
        return d
    d = dict(d)
    for key in ("rope_scaling", "rope_parameters"):
        rp = d.get(key)
        if not isinstance(rp, dict):
            continue
        rp = dict(rp)
        if "mrope_section" in rp:
            d["mrope_section"] = rp.pop("mrope_section")
        if interleaved:
            rp.pop("mrope_interleaved", None)
            rp.pop("interleaved", None)         # Qwen3-Omni's config reads this spelling too
        for t in ("rope_type", "type"):
            if rp.get(t) == "mrope":
                rp[t] = "default"
        plain = key == "rope_scaling" and all(k in ("rope_type", "type") and v == "default" for k, v in rp.items())
        d[key] = None if plain else rp          # transformers 4's {"type": "mrope", ...}: no scaling
    return d


def check_mrope(cfg, default: list, split: bool, rotary: str = "head_dim") -> None:
    """mrope_section (transformers' `default` when not given) a list of non-negative integers; with `split`
    (Qwen2-VL's and GLM-4V's consecutive blocks, torch.split) summing to half the rotary width (the field `rotary`:
    head_dim, or GLM's rotary_dim), which transformers needs to run."""
    if cfg.mrope_section is None:
        cfg.mrope_section = list(default)
    s = cfg.mrope_section
    if not isinstance(s, list) or not s or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in s):
        raise ValueError(f"config: mrope_section must be a list of non-negative integers, got {s!r}")
    half = getattr(cfg, rotary) // 2
    if split and sum(s) != half:
        raise ValueError(f"config: mrope_section {s} sums to {sum(s)}, not {rotary} / 2 = {half}: transformers "
                         f"splits a head's rotary frequencies by it and cannot run this config")


def text_config(d, model_type: str, text_type: str, flat_keys=(), either_tie: bool = False,
                own_keys=OWN_KEYS, towers=("vision_config",), what: str = "images") -> dict:
    """A wrapper's config.json as its text model's, flat (wrapper.flatten: the tower reported once, unknown top-level
    keys reported). transformers 4's Qwen2-VL / Qwen2.5-VL files are flat already, the text model's keys (`flat_keys`)
    beside vision_config: those keys are the text config, as transformers 5.25's __post_init__ reads them. The head
    is tied by the wrapper's tie_word_embeddings (default false), or with `either_tie` (Qwen2-VL, Qwen2.5-VL) by
    text_config's too (their __post_init__ forwards a true one). A text_config of another model_type is refused."""
    if not isinstance(d, dict):
        return d
    if not isinstance(d.get("text_config"), dict):
        if not (any(d.get(t) for t in towers) or set(d) & set(own_keys)):
            return d                            # a converted file's flat config
        text = {k: d[k] for k in flat_keys if k in d}
        d = {k: v for k, v in d.items() if k not in flat_keys} | {"text_config": text}
    kind = d["text_config"].get("model_type", text_type)
    if kind != text_type:
        raise ValueError(f"config: {model_type}'s text_config has model_type {kind!r}; the {model_type} family runs "
                         f"a {text_type} text model")
    tie = bool(d.get("tie_word_embeddings", False))
    if either_tie:
        tie = tie or bool(d["text_config"].get("tie_word_embeddings", False))
    return wrapper.flatten(dict(d, tie_word_embeddings=tie), model_type, own_keys, towers, tie=False, what=what)


def not_read(d, runs: dict, why: str):
    """`d` with each key of `runs` ({key: the value the family runs}) that it sets to another value renamed so that
    the unknown-key report says it is not read and why; null, the value run, or a layer_types of full layers only
    (what runs) are dropped without a word (transformers 5 saves Qwen3-VL-MoE's sliding_window as null)."""
    if not isinstance(d, dict):
        return d

    def runs_anyway(k, v):
        return v is None or v == runs[k] or (k == "layer_types" and isinstance(v, list)
                                              and all(t == "full_attention" for t in v))
    return {(f"{k} ({why}: not read)" if k in runs else k): v for k, v in d.items()
            if not (k in runs and runs_anyway(k, v))}


def fused_experts(ckpt, layers, E: int, F: int, D: int, transposable: bool) -> dict:
    """hf_tensors entries of each expert of the `layers` whose experts are stored 3-D as transformers 5 holds them
    (`mlp.experts.gate_up_proj` [E, 2F, D], `down_proj` [E, D, F]) or, when `transposable` (Qwen3-VL-MoE: the
    releases' layout [E, D, 2F] and [E, F, D]), transposed: as its conversion decides, each tensor is transposed when
    its shape is not the module's (a square one never is). Per-expert tensors (a converted file, a release of
    GLM-4.5V) are read by name."""
    out, held = {}, {}
    for i in layers:
        p = f"model.layers.{i}."
        fused, down = p + "mlp.experts.gate_up_proj", p + "mlp.experts.down_proj"
        if fused not in ckpt:
            continue
        flips = []
        for name, shape in ((fused, (E, 2 * F, D)), (down, (E, D, F))):
            got = tuple(ckpt.info(name)[1])
            t = (shape[0], shape[2], shape[1])
            if got != shape and not (transposable and got == t):
                raise ValueError(f"{name} has shape {got}, not {list(shape)}" + (" or its transpose" if transposable
                                                                                  else ""))
            flips.append(got != shape)
        gate_up = split_experts(ckpt, p, E, F, D, transposed=flips[0], held=held)
        downs = split_experts(ckpt, p, E, F, D, transposed=flips[1], held=held)
        out |= {k: (downs if k.endswith("down_proj.weight") else gate_up)[k] for k in gate_up}
    return out


def hf_tensors(cfg, ckpt, text_tensors=None, tower=TOWER, **where) -> dict:
    """The text model's tensors (model.language_model.* as transformers 5 and the Qwen3-VL releases write them, or
    model.* beside visual.* as the Qwen2-VL / Qwen2.5-VL releases), the tower's accounted for; `where`: the
    wrapper's own prefixes / heads (wrapper.hf_tensors)."""
    return wrapper.hf_tensors(cfg, ckpt, tower, text_tensors=text_tensors, **where)
