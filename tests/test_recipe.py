""".petit files in GGUF's block types and the 4-bit recipe: `petit convert --q4_k | --q5_k | --q6_k | --q5_0 |
--q4_k_m` writes them, every path loads them (as stored where it has SIMD kernels for them, decoded to q8_0 where
not), `petit verify` holds them to the independent reference, and rows that are not whole blocks fall back as
llama.cpp's quantizer does."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import petit
from petit import native as K
from petit.cli import main
from petit.models.recipe import Recipe, fitting
from trainer.verify import verify

from models import TINY, write_model

FIX = Path(__file__).parent / "fixtures" / "hf"
WIDE = dict(TINY, hidden_size=256, intermediate_size=512, head_dim=64, num_hidden_layers=3)


def llama_names(n_layers: int, tied: bool) -> list:
    names = ["model.embed_tokens.weight", "model.norm.weight"] + ([] if tied else ["lm_head.weight"])
    for i in range(n_layers):
        names += [f"model.layers.{i}.{m}.weight" for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                           "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                                           "mlp.down_proj", "input_layernorm")]
    return names


def test_q4_k_m_spends_q6_k_where_llama_cpp_does():
    r = Recipe("q4_k_m", llama_names(16, tied=False))
    more = [i for i in range(16) if r(f"model.layers.{i}.self_attn.v_proj.weight") == "q6_k"]
    assert more == [0, 1, 4, 7, 10, 13, 14, 15]       # llama.cpp's use_more_bits for 16 layers
    assert more == [i for i in range(16) if r(f"model.layers.{i}.mlp.down_proj.weight") == "q6_k"]
    assert {r(f"model.layers.{i}.{m}.weight") for i in range(16)
            for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj")} \
        == {"q4_k"}
    assert r("lm_head.weight") == "q6_k" and r("model.embed_tokens.weight") == "q4_k"
    tied = Recipe("q4_k_m", llama_names(16, tied=True))
    assert tied("model.embed_tokens.weight") == "q6_k"     # the embedding is the head


def test_q4_k_m_gives_experts_down_matrices_q6_k_on_the_same_layers():
    names = llama_names(16, tied=False)
    for i in range(16):
        names += [f"model.layers.{i}.mlp.experts.{e}.{m}.weight" for e in range(4) for m in ("gate_proj", "down_proj")]
        names += [f"model.layers.{i}.block_sparse_moe.experts.0.w2.weight", f"model.layers.{i}.mlp.shared_expert."
                  f"down_proj.weight"]
    r = Recipe("q4_k_m", names)
    more = [0, 1, 4, 7, 10, 13, 14, 15]
    for name in ("mlp.experts.3.down_proj", "block_sparse_moe.experts.0.w2", "mlp.shared_expert.down_proj"):
        assert [i for i in range(16) if r(f"model.layers.{i}.{name}.weight") == "q6_k"] == more, name
    assert {r(f"model.layers.{i}.mlp.experts.{e}.gate_proj.weight") for i in range(16) for e in range(4)} == {"q4_k"}


def test_types_fall_back_along_llama_cpps_chain():
    assert [fitting(t, 64) for t in ("q4_k", "q5_k", "q6_k", "q5_0")] == ["q5_0", "q5_0", "q8_0", "q5_0"]
    assert [fitting(t, 48) for t in ("q4_k", "q6_k", "q4_0")] == ["f16", "f16", "f16"]
    assert [fitting(t, 512) for t in ("q4_k", "q5_k", "q6_k")] == ["q4_k", "q5_k", "q6_k"]
    with pytest.raises(ValueError, match="unknown quantization recipe 'q3_k_m' \\(recipes: q4_k_m\\)"):
        Recipe("q3_k_m", [])


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    path = tmp_path_factory.mktemp("wide") / "f32.petit"
    write_model(path, WIDE, "f32")
    return path


IDS = list(range(3, 40))
# measured on this model (max |logit error| / logit range): q4_k 0.056, q4_k_m 0.048, q5_k 0.031, q6_k 0.014,
# q5_0 0.037; bounds 1.5x those, well inside the dense families' q4_0 bound (0.60)
BOUND = {"q4_k": 0.085, "q4_k_m": 0.075, "q5_k": 0.047, "q6_k": 0.021, "q5_0": 0.056}


@pytest.mark.parametrize("weights", ["q4_k", "q5_k", "q6_k", "q5_0", "q4_k_m"])
def test_convert_writes_block_types_that_load_and_verify(wide, tmp_path, weights, capsys):
    """Run as stored (gguf_stored=True: every type this path has SIMD kernels for); verify as petit.load runs them.
    (On a path without SIMD kernels for them, NEON or scalar, they load as q8_0: the test below.)"""
    needs = {"Q4_K", "Q6_K"} if weights == "q4_k_m" else {weights.upper()}
    if not needs <= K.gguf_simd_types():
        pytest.skip(f"this kernel path has no SIMD kernels for {weights}")
    out = tmp_path / f"{weights}.petit"
    assert main(["convert", str(wide), "-o", str(out), f"--{weights}"]) == 0
    assert capsys.readouterr().err.startswith(f"petit convert: {out}: llama, ")
    ref = petit.load(wide)
    m = petit.load(out, gguf_stored=True)       # q5_0 as stored too (by default it runs decoded to q8_0)
    types = {n: t for n, (t, *_) in m.tensors.items() if n.endswith("proj.weight") or n.endswith("head.weight")}
    if weights == "q4_k_m":        # 3 layers: the last takes more bits (llama.cpp's use_more_bits), the head too
        six = {n for n, t in types.items() if t == "q6_k"}
        assert six == {"lm_head.weight", "model.layers.2.self_attn.v_proj.weight", "model.layers.2.mlp.down_proj.weight"}
        assert set(types.values()) == {"q4_k", "q6_k"} and m.weight_type == "q4_k"
    else:
        assert set(types.values()) == {weights} and m.weight_type == weights
    L0 = ref.logits(IDS)
    err = np.abs(m.logits(IDS) - L0).max() / np.ptp(L0)
    assert err <= BOUND[weights]
    r = verify(out)
    assert r["pass"], r["failures"]


def test_rows_not_whole_blocks_fall_back_and_say_so(tmp_path, capsys):
    out = tmp_path / "m.petit"
    assert main(["convert", str(FIX / "llama"), "-o", str(out), "--q4_k"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (f"petit: warning: {FIX / 'llama'}: wrote 16 matri(ces) in another type: 16 as q5_0 instead of "
                      f"q4_k (rows not whole 256-value blocks: model.embed_tokens.weight, lm_head.weight, "
                      f"model.layers.0.self_attn.q_proj.weight ...)")
    m = petit.load(out, gguf_stored=True)
    assert {t for t, shape, _ in m.tensors.values() if len(shape) == 2} == {"q5_0"}


def test_q5_0_runs_decoded_to_q8_0_where_that_is_faster(wide, tmp_path):
    if "Q5_0" not in K.gguf_simd_types() - K.gguf_fast_types():
        pytest.skip("this path has no row-at-a-time Q5_0 kernel to prefer q8_0 to")
    out = tmp_path / "m.petit"
    assert main(["convert", str(wide), "-o", str(out), "--q5_0"]) == 0
    with pytest.warns(UserWarning) as w:
        m = petit.load(out)
    assert [str(x.message) for x in w] == [
        f"{out}: 23 matri(ces) stored as q5_0 were decoded at load and run as q8_0 (it runs them faster so; "
        f"petit.load(..., gguf_stored=True) keeps them as stored, in less memory)"]
    assert m.weight_type == "q8_0"
    r = verify(out)                    # the engine's q8_0 values, held to the reference
    assert r["pass"], r["failures"]


def test_a_path_without_kernels_for_them_decodes_them_to_q8_0(wide, tmp_path):
    out = tmp_path / "m.petit"
    assert main(["convert", str(wide), "-o", str(out), "--q4_k_m"]) == 0
    code = ("import warnings, petit; warnings.simplefilter('error')\n"
            "try:\n    petit.load(%r)\nexcept UserWarning as w:\n    print(w)\n" % str(out))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PETIT_ISA="scalar"))
    assert r.stdout.strip() == (f"{out}: 23 matri(ces) stored as q4_k, q6_k were decoded at load and run as q8_0 "
                                f"(this CPU's kernel path has no SIMD kernels for them)"), r.stderr


def test_info_says_how_the_block_types_load(wide, tmp_path, capsys):
    out = tmp_path / "m.petit"
    assert main(["convert", str(wide), "-o", str(out), "--q4_k_m"]) == 0
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at_load = next(line for line in lines if line.startswith("at load:"))
    isa = K.info()["isa"]
    if {"Q4_K", "Q6_K"} <= K.gguf_fast_types():
        assert at_load == f"at load:        q4_k, q6_k, f32 as stored (on the {isa} path)"
    else:
        assert at_load == f"at load:        f32 as stored; q4_k, q6_k decoded to q8_0 (on the {isa} path)"
