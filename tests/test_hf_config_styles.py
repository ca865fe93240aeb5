"""Both config.json styles of every family: transformers 4 (`rope_theta`, `rope_scaling`, `partial_rotary_factor`
and family names for them: GPT-NeoX's `rotary_emb_base` / `rotary_pct`, Gemma 3's `rope_local_base_freq`) and
transformers 5 (`rope_parameters` {rope_type, rope_theta, partial_rotary_factor, factor, ...}, one per layer type for
Gemma 3).

Each fixture case has `config_v5.json`: its config.json loaded and saved again by transformers 5.24.0, with
`AutoConfig.from_pretrained(case_folder).save_pretrained(out)` (configs need no torch). A copy of the case folder
with that file as config.json must give the reference logits (the bound of test_hf_parity.py: 1e-4 of each
position's logit range) and the same RoPE settings, layer by layer, as the transformers 4 file.
"""
import json
import shutil
import warnings

import numpy as np
import pytest

import petit
from petit.models import get_family
from petit.models.blocks.rope import scaling_type
from tests.test_hf_parity import DENSE, F32_TOL, FOLDERS, HERE, rel_err

# the families with RoPE settings: transformers 5 rewrote their config (BLOOM, MPT, OPT, GPT-Neo ... have none)
CASES = [c for c in DENSE if (FOLDERS[c] / "config_v5.json").is_file()]


def _ref(case):
    with np.load(FOLDERS[case] / "reference.npz") as r:
        return r["input_ids"], r["logits"]


def _folder(tmp_path, case, config: dict):
    """A copy of the case folder with `config` as its config.json."""
    dst = tmp_path / case
    shutil.copytree(FOLDERS[case], dst, ignore=shutil.ignore_patterns("config_v5.json", "reference.npz"))
    (dst / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dst


def _load(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # both styles must load without any "ignoring ..." report
        return petit.load(folder, weights="f32")


def _v5_config(case) -> dict:
    d = json.loads((FOLDERS[case] / "config_v5.json").read_text(encoding="utf-8"))
    if case == "gemma":
        # transformers 5 rewrites Gemma 1's legacy hidden_act "gelu" to "gelu_pytorch_tanh" when it loads a config
        # (so config_v5.json says tanh), while 4.57, which made the reference, computes the exact erf GELU. That is
        # a change of activation, not of config style: keep the reference's activation here.
        d["hidden_act"] = json.loads((FOLDERS[case] / "config.json").read_text(encoding="utf-8"))["hidden_act"]
    return d


def _rope_fields(cfg) -> dict:
    """The RoPE settings a config carries: theta, partial rotary factor, sliding layers' theta, scaling type and
    factors (the scaling's own keys, without the type's name and original_max_position_embeddings, which
    transformers 5 copies into the scaling from the top level)."""
    out = {k: getattr(cfg, k) for k in ("rope_theta", "partial_rotary_factor", "rope_local_base_freq")
           if hasattr(cfg, k)}
    if hasattr(cfg, "rope_scaling"):
        own = cfg._ROPE_SCALING_EXTRA          # keys the family reads itself (Hunyuan's alpha)
        out["scaling"] = scaling_type({k: v for k, v in (cfg.rope_scaling or {}).items() if k not in own})
        out.update({f"scaling.{k}": v for k, v in (cfg.rope_scaling or {}).items()
                    if k not in ("rope_type", "type", "original_max_position_embeddings")})
    return out


def _layer_ropes(model) -> list:
    """Per layer: None (no RoPE) or its rotary dimension, base, scaling, pair layout, context length and the
    inverse frequencies a forward pass reaching 8, 35 and 300 positions uses."""
    out = []
    for L in model.net.layers:
        r = L.rope
        out.append(None if r is None else
                   (r.dim, r.base, r.kind, r.interleaved, r.context_length,
                    [(inv.tolist(), att) for inv, att in (r.inv_freq(n) for n in (8, 35, 300))]))
    return out


# the cases whose config has no RoPE setting: transformers 5 writes them as 4 did (no config_v5.json)
WITHOUT_ROPE = {"gptj", "codegen", "gpt_neo", "gpt_bigcode", "bloom", "mpt", "opt", "opt_350m"}


# InternLM3 has no transformers class in 4 or 5: its remote configuration_internlm3.py writes the transformers 4 names,
# so transformers 5 cannot rewrite it; the test below spells it the transformers 5 way by hand
REMOTE_CODE = {"internlm3", "internlm3_bias"}


def test_every_case_has_a_transformers_5_config():
    assert set(DENSE) - set(CASES) == WITHOUT_ROPE | REMOTE_CODE
    for c in CASES:
        old = json.loads((FOLDERS[c] / "config.json").read_text(encoding="utf-8"))
        new = json.loads((FOLDERS[c] / "config_v5.json").read_text(encoding="utf-8"))
        assert new["transformers_version"].startswith("5.") and new["model_type"] == old["model_type"]
        assert "rope_scaling" not in new and ("rope_parameters" in new) == (old["model_type"] != "gpt2")


@pytest.mark.parametrize("case", CASES)
def test_transformers_5_config_gives_the_reference_logits_and_the_same_rope(case, tmp_path):
    ids, ref = _ref(case)
    old = _load(FOLDERS[case])
    new = _load(_folder(tmp_path, case, _v5_config(case)))
    err = rel_err(new.logits(ids), ref)
    assert err.max() <= F32_TOL, f"{case}: worst position {err.argmax()} off by {err.max():.2e} of the logit range"
    assert _rope_fields(new.config) == _rope_fields(old.config)
    assert _layer_ropes(new) == _layer_ropes(old)


# the partial-rotary families: a factor unlike both the family default and the fixture's (Phi-3's longrope factor
# lists fix its rotary dimension, so it keeps the fixture's 0.75, unlike its default 1.0)
PARTIAL = {"phi": (0.4, 6), "stablelm": (0.5, 8), "gpt_neox": (0.5, 8), "phi3": (0.75, 12)}


@pytest.mark.parametrize("case", sorted(PARTIAL))
def test_partial_rotary_factor_is_read_from_either_style_alone(case, tmp_path):
    """The factor only in rope_parameters (the top-level copies some transformers 5 files keep removed), or only at
    the top level, gives the same rotary dimension and logits, not the family default's."""
    factor, dim = PARTIAL[case]
    ids, ref = _ref(case)
    old = json.loads((FOLDERS[case] / "config.json").read_text(encoding="utf-8"))
    new = _v5_config(case)
    for key in ("partial_rotary_factor", "rotary_pct"):
        if key in old:
            old[key] = factor
        new.pop(key, None)
    new.pop("rope_theta", None)
    new["rope_parameters"]["partial_rotary_factor"] = factor
    a_model = _load(_folder(tmp_path / "old", case, old))
    b_model = _load(_folder(tmp_path / "new", case, new))
    assert a_model.config.partial_rotary_factor == b_model.config.partial_rotary_factor == factor
    assert [L.rope.dim for L in b_model.net.layers] == [L.rope.dim for L in a_model.net.layers] == \
        [dim] * len(a_model.net.layers)
    a, b = a_model.logits(ids), b_model.logits(ids)
    assert rel_err(b, a).max() <= F32_TOL
    if factor == json.loads((FOLDERS[case] / "config_v5.json").read_text())["rope_parameters"]["partial_rotary_factor"]:
        assert rel_err(b, ref).max() <= F32_TOL
    else:
        assert rel_err(b, ref).max() > 0.05      # another factor computes something else than the reference


def _llama(**kw) -> dict:
    d = json.loads((HERE / "llama" / "config.json").read_text(encoding="utf-8"))
    d.pop("rope_theta")
    d.pop("rope_scaling")
    d.update(kw)
    return d


def _from_dict(d):
    return get_family(d["model_type"]).Config.from_dict(d)


@pytest.mark.parametrize("config, message", [
    (_llama(rope_theta=10000.0, rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
     r"config: rope_theta 10000\.0 and rope_parameters\.rope_theta 500000\.0 disagree \(transformers 4 reads the "
     r"first, transformers 5 the second\)"),
    (_llama(rope_scaling={"rope_type": "linear", "factor": 4.0},
            rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}),
     r"config: rope_scaling \{'rope_type': 'linear', 'factor': 4\.0\} and rope_parameters "
     r"\{'rope_type': 'linear', 'factor': 2\.0\} disagree"),
    (_llama(rope_scaling={"rope_type": "linear", "factor": 4.0}, rope_parameters={"rope_type": "default"}),
     r"config: rope_scaling \{'rope_type': 'linear', 'factor': 4\.0\} and rope_parameters None disagree"),
    (dict(json.loads((HERE / "gpt_neox" / "config.json").read_text(encoding="utf-8")),
          rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.5}),
     r"config: partial_rotary_factor 0\.25 and rope_parameters\.partial_rotary_factor 0\.5 disagree"),
    (dict(json.loads((HERE / "gpt_neox" / "config.json").read_text(encoding="utf-8")), rotary_pct=0.5),
     r"config: rotary_pct 0\.5 and partial_rotary_factor 0\.25 disagree"),
    (dict(json.loads((HERE / "gemma3_text" / "config_v5.json").read_text(encoding="utf-8")),
          rope_local_base_freq=20000.0),
     r"config: rope_local_base_freq 20000\.0 and rope_parameters\.sliding_attention\.rope_theta 10000\.0 disagree"),
    (_llama(rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}),
     r"config: partial_rotary_factor 0\.5 \(rope_parameters\.partial_rotary_factor\) is not supported by the llama "
     r"family: its attention rotates whole heads"),
    (_llama(rope_parameters={"rope_type": "yarn", "factor": 4.0, "warp": 2}),
     r"config: rope_parameters yarn: unsupported key\(s\) warp"),
    (_llama(rope_parameters={"rope_type": "magic", "factor": 4.0}),
     r"config: rope_parameters type 'magic' is not supported \(supported: default, linear, dynamic, llama3, yarn, "),
    (_llama(rope_parameters=[10000.0]), r"config: rope_parameters must be an object, got \[10000\.0\]"),
    (_llama(rope_parameters={"full_attention": {"rope_theta": 1e4}, "rope_theta": 1e4}),
     r"config: rope_parameters mixes per-layer-type entries \(full_attention\) with other keys \(rope_theta\)"),
    (dict(json.loads((HERE / "gemma2" / "config_v5.json").read_text(encoding="utf-8")),
          rope_parameters={"full_attention": {"rope_theta": 1e4}, "sliding_attention": {"rope_theta": 1e5}}),
     r"config: rope_parameters gives full_attention and sliding_attention layers different RoPEs; the gemma2 "
     r"family uses one RoPE for all its layers"),
    (dict(json.loads((HERE / "gemma3_text" / "config_v5.json").read_text(encoding="utf-8")),
          rope_parameters={"full_attention": {"rope_theta": 1e6},
                           "sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
     r"config: rope_parameters\.sliding_attention: a linear scaling of the sliding layers' RoPE is not supported "
     r"by the gemma3_text family"),
])
def test_config_styles_that_disagree_or_cannot_be_run_are_refused_by_name(config, message):
    with pytest.raises(ValueError, match=message):
        _from_dict(config)


def test_a_disagreement_reaches_the_user_naming_config_json(tmp_path):
    folder = _folder(tmp_path, "llama", _llama(rope_theta=1e4, rope_parameters={"rope_theta": 5e5}))
    with pytest.raises(ValueError, match=r"config\.json: config: rope_theta 10000\.0 and rope_parameters\.rope_theta "
                                         r"500000\.0 disagree"):
        petit.load(folder)


def test_unknown_keys_inside_rope_parameters_are_reported_not_dropped():
    d = _llama(rope_parameters={"rope_type": "default", "rope_theta": 5e5, "mrope_section": [2, 2, 4]})
    with pytest.warns(UserWarning, match=r"ignoring unknown key\(s\) rope_parameters\.mrope_section"):
        cfg = _from_dict(d)
    assert cfg.unknown_keys == ["rope_parameters.mrope_section"]
    assert cfg.rope_theta == 5e5


def test_a_per_layer_type_entry_for_layers_without_rope_is_reported():
    """Cohere 2's full-attention layers use no position encoding: an entry for them is reported, not used."""
    d = json.loads((HERE / "cohere2" / "config_v5.json").read_text(encoding="utf-8"))
    d["rope_parameters"] = {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4},
                            "full_attention": {"rope_type": "default", "rope_theta": 1e6}}
    with pytest.warns(UserWarning, match=r"ignoring unknown key\(s\) rope_parameters\.full_attention"):
        cfg = _from_dict(d)
    assert cfg.rope_theta == 5e4


def test_a_partial_rotary_factor_of_one_is_accepted_by_every_family():
    cfg = _from_dict(_llama(rope_parameters={"rope_type": "default", "rope_theta": 5e5, "partial_rotary_factor": 1.0}))
    assert cfg.rope_theta == 5e5 and cfg.unknown_keys == []


def test_defaults_apply_only_when_neither_style_gives_a_value():
    """Gemma 3's full layers default to theta 1e6 and its sliding layers to 1e4 (transformers' defaults)."""
    d = json.loads((HERE / "gemma3_text" / "config_v5.json").read_text(encoding="utf-8"))
    d["rope_parameters"] = {"full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "default"}}
    cfg = _from_dict(d)
    assert (cfg.rope_theta, cfg.rope_local_base_freq, cfg.rope_scaling) == (1e6, 1e4, None)


@pytest.mark.parametrize("case", sorted(REMOTE_CODE))
def test_a_remote_code_config_spelled_the_transformers_5_way_gives_the_same_logits(case, tmp_path):
    ids, ref = _ref(case)
    d = json.loads((FOLDERS[case] / "config.json").read_text(encoding="utf-8"))
    d["rope_parameters"] = dict(d.pop("rope_scaling"), rope_theta=d.pop("rope_theta"))
    new = _load(_folder(tmp_path, case, d))
    assert rel_err(new.logits(ids), ref).max() <= F32_TOL
    assert new.config.rope_theta == 50000000.0 and new.config.rope_scaling == {"rope_type": "dynamic", "factor": 6.0}


# transformers 5 writes a non-finite float as a tagged object (PreTrainedConfig._encode_special_floats): Mamba-2's
# time_step_limit is [0.0, {"__float__": "Infinity"}] in every config.json it saves
TAGGED = {"Infinity": {"__float__": "Infinity"}, "-Infinity": {"__float__": "-Infinity"}, "NaN": {"__float__": "NaN"}}


@pytest.mark.parametrize("case", ["mamba2", "nemotron_h"])
def test_a_non_finite_float_tagged_as_transformers_5_writes_it_is_read(tmp_path, case):
    src = FOLDERS[case]
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config["time_step_limit"] = [0.0, TAGGED["Infinity"]]
    want = petit.load(src, weights="f32")
    got = _load(_folder(tmp_path, case, config))
    assert got.config.time_step_limit == [0.0, float("inf")]
    ids, _ = _ref(case)
    np.testing.assert_array_equal(got.logits(ids), want.logits(ids))


def test_the_float_tags_decode_to_their_values_anywhere_in_a_config(tmp_path):
    from petit.loading.folder import read_config
    (tmp_path / "config.json").write_text(json.dumps({"a": [TAGGED["-Infinity"], {"b": TAGGED["NaN"]}],
                                                      "c": TAGGED["Infinity"], "d": {"__float__": "Inf"}}))
    d = read_config(str(tmp_path))
    assert d["a"][0] == float("-inf") and np.isnan(d["a"][1]["b"]) and d["c"] == float("inf")
    assert d["d"] == {"__float__": "Inf"}       # not a tag transformers writes: left as it is, for the family to refuse


def test_an_unknown_float_tag_is_refused_by_the_field_that_holds_it(tmp_path):
    src = FOLDERS["mamba2"]
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config["time_step_limit"] = [0.0, {"__float__": "Inf"}]
    with pytest.raises(ValueError, match=r"time_step_limit must be \[low, high\]"):
        petit.load(_folder(tmp_path, "mamba2", config), weights="f32")
