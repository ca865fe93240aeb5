"""DeepSeek-V4's RoPE settings (the family helper: deepseek_v4_config.py reads them with it): transformers 5.25's
`rope_parameters` keyed `main` (the sliding layers', no scaling) and `compress` (the compressed layers', default or
yarn), or the released checkpoint's flat `rope_parameters` / `rope_scaling`, into the config's fields."""

_ROPE_KEYS = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "factor", "original_max_position_embeddings",
              "beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"}


def read_rope(d: dict) -> list:
    """d's RoPE keys (popped) read into DeepSeek-V4's fields, in place; the unknown keys' names."""
    rp, unknown = d.pop("rope_parameters", None) or {}, []
    scaling = d.pop("rope_scaling", None) or {}
    if isinstance(rp.get("main"), dict) and isinstance(rp.get("compress"), dict):
        main, comp = rp["main"], dict(rp["compress"])
        unknown += [f"rope_parameters.{k}" for k in rp if k not in ("main", "compress")]
    else:
        main, comp = {k: v for k, v in rp.items() if k == "rope_theta"}, {**scaling, **rp}
        comp.pop("rope_theta", None)
    for label, sub in (("main", main), ("compress", comp)):
        unknown += [f"rope_parameters.{label}.{k}" for k in sub if k not in _ROPE_KEYS]
    if main.get("rope_type", main.get("type", "default")) != "default":
        raise ValueError(f"config: rope_parameters.main rope_type {main.get('rope_type')!r}: DeepSeek-V4's "
                         f"sliding layers rope without scaling (transformers' default rope)")
    for key, field in (("rope_theta", "rope_theta"), ("partial_rotary_factor", "partial_rotary_factor")):
        if key in main:
            d[field] = main[key]
    if "rope_theta" in comp:
        d["compress_rope_theta"] = comp["rope_theta"]
    kind = comp.get("rope_type", comp.get("type", "default"))
    if kind not in ("default", "yarn"):
        raise ValueError(f"config: rope_parameters.compress rope_type {kind!r} is not supported by deepseek_v4 "
                         f"(supported: default, yarn)")
    if kind == "yarn":
        d["compress_rope_scaling"] = {k: v for k, v in comp.items() if k in _ROPE_KEYS - {
            "rope_theta", "partial_rotary_factor", "type"}} | {"rope_type": "yarn", "attention_factor": 1.0}
    return unknown
