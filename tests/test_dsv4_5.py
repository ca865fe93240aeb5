"""The dsv4 group of issue 30 (tests/fixtures/hf5_dsv4: DeepSeek-V4, made by transformers 5.25), while the family
is not yet run by the engine (petit/models/refusals.py says what is missing; tests/models.py PENDING_FIXTURES keeps
the shared parity / verify / chat tests off it, and test_hf_parity checks it is refused by name).

- trainer/reference/deepseek_v4_f64.py, the float64 definition the kernels are to match (hyper-connections with
  Sinkhorn, sliding-window + compressed sparse / heavily compressed attention with sinks, the Lightning indexer,
  hash and sqrtsoftplus routing, clamped SwiGLU experts), equals transformers at every position of the three
  prompts and continues the prompt as transformers' greedy decoding does.
- What the refusal names.
"""
import json
from pathlib import Path

import numpy as np
import pytest

import petit
from trainer.reference import deepseek_v4_f64 as ref64

DIR = Path(__file__).parent / "fixtures" / "hf5_dsv4"
FOLDER = DIR / "deepseek_v4"
TOL = 1e-5          # of each position's logit range; measured 5.6e-7 / 7.3e-7 / 8.6e-7 (prompt / long / chat)


def rel_err(got, ref):
    return np.abs(got - ref).max(axis=1) / (ref.max(axis=1) - ref.min(axis=1))


@pytest.mark.parametrize("name", ["reference", "reference_long", "reference_chat"])
def test_float64_definition_equals_transformers_at_every_position(name):
    z = np.load(FOLDER / f"{name}.npz")
    got = ref64.logits(FOLDER, z["input_ids"])
    assert got.shape == z["logits"].shape
    err = rel_err(got, z["logits"].astype(np.float64))
    assert err.max() <= TOL, (name, float(err.max()), int(err.argmax()))
    assert (got.argmax(1) == z["logits"].argmax(1)).all()


def test_float64_definition_continues_the_prompt_as_transformers_greedy():
    z = np.load(FOLDER / "reference.npz")
    ids, out = [int(t) for t in z["input_ids"]], []
    for _ in range(len(z["greedy"])):
        out.append(int(ref64.logits(FOLDER, ids + out)[-1].argmax()))
    assert out == [int(t) for t in z["greedy"]]


def test_the_fixture_exercises_every_block_kind():
    """Prompts longer than the window and the compression rates, more compressed entries than the indexer keeps,
    hash and learned routing, more than one residual stream: so a definition missing any of them fails above."""
    cfg = json.loads((FOLDER / "config.json").read_text())
    n = len(np.load(FOLDER / "reference.npz")["input_ids"])
    assert set(cfg["layer_types"]) == {"sliding_attention", "compressed_sparse_attention",
                                       "heavily_compressed_attention"}
    assert set(cfg["mlp_layer_types"]) == {"hash_moe", "moe"} and cfg["scoring_func"] == "sqrtsoftplus"
    assert n > 2 * cfg["sliding_window"] and n // cfg["compress_rates"]["compressed_sparse_attention"] > cfg["index_topk"]
    assert n // cfg["compress_rates"]["heavily_compressed_attention"] >= 2 and cfg["hc_mult"] > 1
    feats = json.loads((DIR / "cases.json").read_text())["cases"]["deepseek_v4"]["feature_checks"]
    assert all(f["max_abs_logit_diff"] > 1e-3 for f in feats) and len(feats) >= 8


def test_the_family_is_refused_naming_what_it_adds():
    with pytest.raises(ValueError) as e:
        petit.load(FOLDER)
    msg = str(e.value)
    for what in ("deepseek_v4", "compressed sparse", "heavily compressed", "hyper-connections", "hash-routed", "sqrtsoftplus"):
        assert what in msg, (what, msg)


def test_the_reference_refuses_what_it_does_not_define(tmp_path):
    for f in FOLDER.iterdir():
        (tmp_path / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((FOLDER / "config.json").read_text())
    cfg["rope_parameters"]["compress"].update(rope_type="yarn", factor=4.0)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="rope_type 'yarn' \\(compress\\) not in this reference"):
        ref64.load(tmp_path)
