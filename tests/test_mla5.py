"""The latent-attention (mla) group of issue 30 (tests/fixtures/hf5_mla: families transformers 5 added around
DeepSeek's multi-head latent attention): what tests/test_hf_parity.py, test_moe.py, test_verify_families.py and the
app's chat test do not already hold for every hf5 fixture.

- Parity at every position of the two other prompts of each fixture, the 140-token one and the four-message chat
  (reference_long.npz, reference_chat.npz), at f32 within 1e-4 of each position's logit range.
- The forward plan equals the per-op path bit for bit on these families' blocks (tests/test_plan.py's check).
- Each family's particulars (GLM-4.7-Flash's mlp_layer_types, ...).
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit

from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_mla"
FOLDERS = {p.name: p for p in sorted(DIR.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
F32_TOL = 1e-4


def _load(folder, weights="f32"):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a fixture loads without any "ignoring ..." report
        return petit.load(folder, weights=weights)


def rel_err(got, ref):
    return np.abs(got - ref).max(axis=1) / (ref.max(axis=1) - ref.min(axis=1))


def _config(case: str) -> dict:
    return json.loads((FOLDERS[case] / "config.json").read_text())


def _with_config(tmp_path, case: str, **change) -> Path:
    d = tmp_path / case
    shutil.copytree(FOLDERS[case], d)
    cfg = _config(case)
    for k, v in change.items():
        if v is ...:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("prompt", ["long", "chat"])
@pytest.mark.parametrize("case", CASES)
def test_long_and_chat_prompts_match_transformers_at_every_position(case, prompt):
    ref = np.load(FOLDERS[case] / f"reference_{prompt}.npz")
    assert len(ref["input_ids"]) >= (100 if prompt == "long" else 60)
    err = rel_err(_load(FOLDERS[case]).logits(ref["input_ids"]), ref["logits"])
    assert err.max() <= F32_TOL, f"{case} {prompt}: position {err.argmax()} off by {err.max():.2e} of the range"


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights):
    _assert_same(_load(FOLDERS[case], weights), "f32")


def test_glm4_moe_lite_routes_where_mlp_layer_types_says(tmp_path):
    """[dense, sparse, sparse] as written; without the key, transformers' default (the same here); another list moves
    the experts (and a layer with no experts stored is refused by its missing tensors)."""
    net = _load(FOLDERS["glm4_moe_lite"]).net
    assert [L.moe is not None for L in net.layers] == [False, True, True]
    m = net.layers[1].moe
    assert (m.top_k, m.scoring, m.routed_scale, m.sel_bias is not None) == (2, "sigmoid", 1.8, True)
    d = _with_config(tmp_path, "glm4_moe_lite", mlp_layer_types=..., first_k_dense_replace=...)
    ref = np.load(d / "reference.npz")
    assert rel_err(_load(d).logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


@pytest.mark.parametrize("change, message", [
    ({"mlp_layer_types": ["dense", "sparse"]}, r"mlp_layer_types must list 3 values, each 'dense' or 'sparse'"),
    ({"mlp_layer_types": ["dense", "moe", "sparse"]}, "mlp_layer_types must list 3 values"),
    ({"first_k_dense_replace": 2}, r"first_k_dense_replace 2 contradicts mlp_layer_types"),
    ({"attention_bias": True}, "attention_bias / mlp_bias are not supported by the glm4_moe_lite family"),
    ({"scoring_func": "softmax"}, "scoring_func 'softmax' is not glm4_moe_lite's"),
])
def test_glm4_moe_lite_refuses_what_it_cannot_run(tmp_path, change, message):
    d = _with_config(tmp_path, "glm4_moe_lite", **change)
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")
