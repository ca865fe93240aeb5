"""The keys of MiMo-V2-Flash's Hub config.json (the release's remote code), which transformers 5 does not write:
read into mimo_v2_flash's transformers-5 fields, or refused where they ask for what that architecture is not.

- `hybrid_layer_pattern` (1: a sliding layer) is `layer_types`, `moe_layer_freq` (1: routed experts) is
  `mlp_layer_types`; given with them, they must agree;
- `swa_num_key_value_heads` must be twice `num_key_value_heads`, `swa_num_attention_heads` / `swa_head_dim` /
  `swa_v_head_dim` the full layers' (transformers' MiMo-V2-Flash differs only in the kv heads);
- `add_swa_attention_sink_bias` true and `add_full_attention_sink_bias` false (sinks in the sliding layers only);
- `topk_method` noaux_tc, `scoring_func` sigmoid, no `n_shared_experts`;
- `layernorm_epsilon` the norms' eps (equal to rms_norm_eps when both are given); `swa_rope_theta` the sliding
  layers' RoPE base (mimo_v2_flash's `_ROPE_ALIASES`); `sliding_window_size` + 1 the window (in the family)."""

RELEASE_FIELDS = ("hybrid_layer_pattern", "moe_layer_freq", "swa_num_key_value_heads", "swa_num_attention_heads",
                  "swa_head_dim", "swa_v_head_dim", "add_swa_attention_sink_bias", "add_full_attention_sink_bias",
                  "topk_method", "scoring_func", "n_shared_experts", "layernorm_epsilon")


def _pattern(cfg, key: str, target: str, one: str, zero: str) -> None:
    given, n = getattr(cfg, key), cfg.num_hidden_layers
    if given is None:
        return
    if not isinstance(given, list) or len(given) != n or any(v not in (0, 1) or isinstance(v, bool) for v in given):
        raise ValueError(f"config: {key} must list {n} values of 0 / 1, got {given!r}")
    kinds = [one if v else zero for v in given]
    if getattr(cfg, target) is not None and getattr(cfg, target) != kinds:
        raise ValueError(f"config: {key} {given} and {target} {getattr(cfg, target)} disagree")
    setattr(cfg, target, kinds)


def read_release_keys(cfg) -> None:
    """Fold the release's keys into the transformers-5 fields of `cfg` (a MiMoV2FlashConfig), or raise naming one."""
    _pattern(cfg, "hybrid_layer_pattern", "layer_types", "sliding_attention", "full_attention")
    _pattern(cfg, "moe_layer_freq", "mlp_layer_types", "sparse", "dense")
    want = {"swa_num_key_value_heads": 2 * (cfg.num_key_value_heads or cfg.num_attention_heads),
            "swa_num_attention_heads": cfg.num_attention_heads, "swa_head_dim": cfg.head_dim,
            "swa_v_head_dim": cfg.v_head_dim, "add_swa_attention_sink_bias": True,
            "add_full_attention_sink_bias": False, "topk_method": "noaux_tc", "scoring_func": "sigmoid"}
    for key, value in want.items():
        got = getattr(cfg, key)
        if got is not None and (got != value or isinstance(got, bool) != isinstance(value, bool)):
            raise ValueError(f"config: {key} {got!r} is not supported by the mimo_v2_flash family (it runs {value!r}: "
                             f"transformers' MiMo-V2-Flash)")
    if cfg.n_shared_experts:
        raise ValueError(f"config: n_shared_experts {cfg.n_shared_experts!r} is not supported by the mimo_v2_flash "
                         f"family (it has no shared expert)")
    eps = cfg.layernorm_epsilon
    if cfg.rms_norm_eps is None:
        cfg.rms_norm_eps = 1e-5 if eps is None else eps
    elif eps is not None and eps != cfg.rms_norm_eps:
        raise ValueError(f"config: layernorm_epsilon {eps!r} and rms_norm_eps {cfg.rms_norm_eps!r} disagree")
