"""Mixture-of-experts models as GGUF files (llama.cpp's qwen3moe, qwen2moe, olmoe, granitemoe, and its llama
architecture with experts: Mixtral): `petit convert` writes each layer's experts as llama.cpp stacks them (3-D
ffn_{gate,up,down}_exps, the router ffn_gate_inp, a shared expert's _shexp tensors), Petit reads them back as
memory-mapped slices, one matrix per expert, and what llama.cpp cannot run as the checkpoint runs is refused by name.
llama.cpp's own logits for these files are checked in tests/test_gguf_write.py (tests/fixtures/gguf_written)."""
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.cli import main
from petit.formats.gguf import GGUFFile

FIX = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIX / "gguf_written"))
import moe_variants  # noqa: E402

ARCH = {"qwen3_moe_all": "qwen3moe", "qwen2_moe_all": "qwen2moe", "mixtral_full": "llama", "olmoe_mha": "olmoe",
        "granitemoe": "granitemoe", "granitemoeshared": "granitemoe"}


def _folder(case, tmp_path):
    return moe_variants.build(case, tmp_path) if case in moe_variants.CASES else FIX / "hf_moe" / case


@pytest.mark.parametrize("case", sorted(ARCH))
def test_read_back_it_is_the_same_model_with_its_experts_stacked(tmp_path, case):
    folder = _folder(case, tmp_path)
    out = tmp_path / "m.gguf"
    assert main(["convert", str(folder), "-o", str(out), "--q8_0"]) == 0
    cfg = json.loads((folder / "config.json").read_text())
    E = cfg.get("num_experts") or cfg["num_local_experts"]
    F = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    D = cfg["hidden_size"]
    with GGUFFile(out) as f:
        assert f.metadata["general.architecture"] == ARCH[case]
        assert f.metadata[f"{ARCH[case]}.expert_count"] == E
        assert f.metadata[f"{ARCH[case]}.expert_used_count"] == cfg["num_experts_per_tok"]
        t = f.tensors
        assert (t["blk.1.ffn_gate_exps.weight"].shape, t["blk.1.ffn_down_exps.weight"].shape) == ((E, F, D),
                                                                                                   (E, D, F))
        assert (t["blk.1.ffn_gate_exps.weight"].type, t["blk.1.ffn_gate_inp.weight"].type) == ("Q8_0", "F32")
        assert t["blk.1.ffn_gate_inp.weight"].shape == (E, D)
        if case == "qwen2_moe_all":
            assert t["blk.1.ffn_gate_inp_shexp.weight"].shape == (D,)
            assert f.metadata["qwen2moe.expert_shared_feed_forward_length"] == cfg["shared_expert_intermediate_size"]
        if case == "granitemoeshared":          # llama.cpp's granitemoe with a shared MLP
            S = cfg["shared_intermediate_size"]
            assert (t["blk.1.ffn_up_shexp.weight"].shape, t["blk.1.ffn_down_shexp.weight"].shape) == ((S, D), (D, S))
            assert f.metadata["granitemoe.expert_shared_feed_forward_length"] == S
    ids = np.load(moe_variants.HF_MOE / moe_variants.CASES.get(case, case) / "reference.npz")["input_ids"]
    src, back = petit.load(folder, weights="q8_0"), petit.load(out)
    assert back.config.model_type == src.config.model_type
    want = src.logits(ids)
    # the same q8_0 bytes and kernels; RoPE on adjacent pairs where llama.cpp's converter permutes q / k rows
    assert np.abs(back.logits(ids) - want).max() <= 1e-5 * np.ptp(want)


def test_the_experts_are_slices_of_the_mapped_file_and_a_step_reads_only_the_chosen(tmp_path):
    out = tmp_path / "m.gguf"
    assert main(["convert", str(FIX / "hf_moe" / "granitemoe"), "-o", str(out), "--q8_0"]) == 0
    m = petit.load(out, repack=False)
    stacked = m._source.raw("blk.0.ffn_up_exps.weight")       # the file's mapped bytes of the 8 experts
    moe = m.net.layers[0].moe
    per = stacked.nbytes // 8
    for e, w in enumerate(moe.up):          # expert e's rows: the e-th eighth of the stacked tensor, not a copy
        assert np.shares_memory(w.raw, stacked)
        np.testing.assert_array_equal(w.raw.reshape(-1), stacked[e * per:(e + 1) * per])
    cache = m.new_cache(32)
    m.forward(list(range(1, 9)), cache)
    before = moe.matrices_used
    m.forward([9], cache)
    assert moe.matrices_used - before == 3 * moe.top_k < 3 * len(moe.up)


def _edit(tmp_path, case, **changes):
    folder = tmp_path / case
    shutil.copytree(FIX / "hf_moe" / case, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


@pytest.mark.parametrize("case,changes,msg", [
    ("qwen3_moe", {}, "llama.cpp's qwen3moe has experts in every layer, and this model has dense layers "
                      "(mlp_only_layers [1], decoder_sparse_step 1)"),
    ("qwen2_moe", {}, "llama.cpp's qwen2moe has experts in every layer, and this model has dense layers "
                      "(mlp_only_layers [], decoder_sparse_step 2)"),
    ("qwen3_moe", {"mlp_only_layers": [], "num_hidden_layers": 1, "norm_topk_prob": False},
     "llama.cpp's qwen3moe always renormalises the chosen experts' weights, and this model has norm_topk_prob "
     "False: it would run differently"),
    ("olmoe", {}, "llama.cpp's olmoe sizes the k norm for as many key / value heads as query heads, and this model "
                  "has 2 of 4: it would refuse the file"),
])
def test_what_llama_cpp_would_run_otherwise_is_refused_and_nothing_is_left(tmp_path, capsys, case, changes, msg):
    folder = _edit(tmp_path, case, **changes) if changes else FIX / "hf_moe" / case
    out = tmp_path / "out"
    out.mkdir()
    assert main(["convert", str(folder), "-o", str(out / "m.gguf")]) == 1
    assert capsys.readouterr().err.strip().endswith(f"petit convert: error: {folder}: {msg}")
    assert list(out.iterdir()) == []


def test_a_sliding_window_llama_cpp_drops_is_caught_by_the_read_back(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert main(["convert", str(FIX / "hf_moe" / "mixtral"), "-o", str(out / "m.gguf"), "--f32"]) == 1
    err = capsys.readouterr().err
    assert "a GGUF file cannot hold this mixtral model exactly" in err
    assert "sliding_window: 8 here, None as read from GGUF" in err
    assert list(out.iterdir()) == []
