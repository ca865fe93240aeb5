"""The dense group of issue 30 (tests/fixtures/hf5_dense: families transformers 5 added close to one Petit runs):
what tests/test_hf_parity.py, test_moe.py, test_verify_families.py and the app's chat test do not already hold for
every hf5 fixture.

- (Parity at every position of the 140-token and chat prompts: tests/test_hf_parity.py, over every fixture.)
- The forward plan equals the per-op path bit for bit on these families' blocks (tests/test_plan.py's check).
- Each family's particulars: GraniteSWA's refusals of a malformed layer_rope_theta / a sliding layer without a
  window, GraniteMoeSWA's experts read from GraniteMoE's spelling too.
"""
import json
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit

from test_plan import _assert_same
from models import load_strict as _load, rel_err

DIR = Path(__file__).parent / "fixtures" / "hf5_dense"
FOLDERS = {p.name: p for p in sorted(DIR.iterdir()) if (p / "reference.npz").is_file()}
CASES = sorted(FOLDERS)
F32_TOL = 1e-4


@pytest.mark.parametrize("weights", ["f32", "q8_0"])
@pytest.mark.parametrize("case", CASES)
def test_the_plan_equals_the_per_op_path(case, weights):
    _assert_same(_load(FOLDERS[case], weights), "f32")


def _config(case: str) -> dict:
    return json.loads((FOLDERS[case] / "config.json").read_text())


@pytest.mark.parametrize("case", ["granite_swa", "granitemoe_swa"])
def test_granite_swa_reads_each_layers_attention(case):
    net = _load(FOLDERS[case]).net
    assert [L.window for L in net.layers] == [0, 8, 8]
    assert [None if L.rope is None else L.rope.base for L in net.layers] == [1e4, None, 1e6]
    assert all(L.sinks is not None and L.sinks.a.shape == (4,) for L in net.layers)


@pytest.mark.parametrize("change, message", [
    ({"layer_rope_theta": [1e4, 0.0]}, r"layer_rope_theta must list 3 non-negative RoPE bases \(0: no position"),
    ({"layer_rope_theta": [1e4, -1.0, 1e4]}, "layer_rope_theta must list 3"),
    ({"sliding_window": None}, "sliding layers need a positive sliding_window, got None"),
    ({"layer_types": ["full_attention", "chunked_attention", "full_attention"]}, "layer_types must list 3 values"),
])
def test_granite_swa_refuses_what_transformers_cannot_run(tmp_path, change, message):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["granite_swa"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("granite_swa"), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


def _rename_tensors(src: Path, dst: Path, rename) -> None:
    """A copy of a safetensors file with its tensors renamed (the header rewritten, the data as is)."""
    raw = src.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head = {rename(k): v for k, v in head.items()}
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    dst.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def test_granitemoe_swa_reads_granitemoes_spelling_of_the_experts(tmp_path):
    """The same experts stored as GraniteMoE names them (input_linear, output_linear, router.layer): the same
    logits, no tensor left unused."""
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["granitemoe_swa"], d)
    names = {"experts.gate_up_proj": "input_linear.weight", "experts.down_proj": "output_linear.weight",
             "router.weight": "router.layer.weight"}

    def rename(k):
        for new, old in names.items():
            if k.endswith("block_sparse_moe." + new):
                return k[: -len(new)] + old
        return k
    _rename_tensors(FOLDERS["granitemoe_swa"] / "model.safetensors", d / "model.safetensors", rename)
    ref = np.load(d / "reference.npz")
    model = _load(d)
    assert not any("experts.gate_up_proj" in n for n in model.tensors)
    assert rel_err(model.logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


def test_nanochat_refuses_an_activation_it_cannot_run(tmp_path):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["nanochat"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("nanochat"), hidden_act="xielu")))
    with pytest.raises(ValueError, match="hidden_act 'xielu' is not supported by the nanochat family"):
        petit.load(d, weights="f32")


def test_apertus1p5_text_runs_its_pruned_head():
    """The head's 304 rows are the logits' width; the input embeddings keep the 320-row vocabulary, and an input id
    past the head (a visual or audio code of the multimodal model) is refused by name."""
    model = _load(FOLDERS["apertus1p5_text"])
    assert model.vocab_size == 304 and model.net.lm_head.shape == (304, 64) and model.net.embed.shape == (320, 64)
    with pytest.raises(ValueError, match=r"token id\(s\) \[310\] out of range for a vocabulary of 304"):
        model.logits(np.array([1, 310]))


@pytest.mark.parametrize("key, value", [("clip_qkv", 8.0), ("use_sliding_window", True)])
def test_iquestcoder_refuses_what_transformers_refuses(tmp_path, key, value):
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["iquestcoder"], d)
    (d / "config.json").write_text(json.dumps(dict(_config("iquestcoder"), **{key: value})))
    with pytest.raises(ValueError, match=f"{key} {value!r} is not supported by the iquestcoder family"):
        petit.load(d, weights="f32")
    (d / "config.json").write_text(json.dumps(dict(_config("iquestcoder"), clip_qkv=None, use_sliding_window=False)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # null / false: read, and nothing to report
        petit.load(d, weights="f32")


def test_hyperclovax_resolves_a_null_attention_multiplier(tmp_path):
    """Null (the class default, which transformers resolves before it writes config.json): head_dim^-0.5, the same
    logits as the fixture's written 0.25."""
    d = tmp_path / "m"
    shutil.copytree(FOLDERS["hyperclovax"], d)
    assert _config("hyperclovax")["attention_multiplier"] == 0.25
    (d / "config.json").write_text(json.dumps(dict(_config("hyperclovax"), attention_multiplier=None)))
    ref = np.load(d / "reference.npz")
    model = _load(d)
    assert model.net.arch.attn_scale == 0.25
    assert rel_err(model.logits(ref["input_ids"]), ref["logits"]).max() <= F32_TOL


@pytest.mark.parametrize("case, change, message", [
    ("internlm2", {"bias": True}, "bias true .* is not supported by the internlm2 family: no released InternLM2"),
    ("minicpm", {"attention_bias": True}, "attention_bias / mlp_bias are not supported by the minicpm family"),
])
def test_remote_code_families_refuse_what_no_reference_runs(tmp_path, case, change, message):
    """llama.cpp, the reference of these two, reads no such bias (and no released checkpoint has one)."""
    d = tmp_path / "m"
    shutil.copytree(FOLDERS[case], d)
    (d / "config.json").write_text(json.dumps(dict(_config(case), **change)))
    with pytest.raises(ValueError, match=message):
        petit.load(d, weights="f32")


# --- GGUF: llama.cpp's own conversions of these folders (tests/fixtures/gguf5_dense, its README says how) ---

GGUF = Path(__file__).parent / "fixtures" / "gguf5_dense"
GGUF_MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
GGUF_READ = ["granite_swa", "internlm2", "jais2", "minicpm"]


def _gguf(case, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return petit.load(GGUF / case / "q8_0.gguf", **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_as_stored_is_as_close_as_llama_cpps_own_run(case):
    ref = np.load(GGUF / case / "q8_0.npz")
    got = _gguf(case).logits(ref["input_ids"])
    assert _gguf(case).weight_type == "q8_0"
    err, theirs = _scaled(got, ref["exact_logits"]), _scaled(ref["logits"], ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


def test_gguf_granite_swa_reads_the_windows_the_rope_pattern_and_the_sinks():
    """The file's sliding pattern and rope pattern (layer 1 NoPE); one base for the RoPE layers, as llama.cpp runs
    them (the folder's layer 2 has base 1e6, which no GGUF key holds)."""
    model = _gguf("granite_swa", weights="f32")
    assert model.config.model_type == "granite_swa"
    net = model.net
    assert [L.window for L in net.layers] == [0, 8, 8]
    assert [None if L.rope is None else L.rope.base for L in net.layers] == [1e4, None, 1e4]
    assert net.layers[0].rope.interleaved and all(L.sinks is not None for L in net.layers)
    folder = np.asarray(petit.load(FOLDERS["granite_swa"], weights="f32").net.layers[2].sinks.a)
    assert np.array_equal(net.layers[2].sinks.a, folder)


def test_gguf_granite_swa_with_experts_is_refused_by_name():
    path = GGUF / "granitemoe_swa" / "q8_0.gguf"
    with pytest.raises(ValueError, match=r"a granite_swa file with experts \(GraniteMoeSWA: the converter fuses their "
                                         r"gate / up in ffn_gate_up_exps\) is not read by Petit yet"):
        petit.load(path)


@pytest.mark.parametrize("case", GGUF_READ)
def test_gguf_converts_to_a_petit_file_with_the_same_logits(tmp_path, case):
    from petit.cli import main
    ref = np.load(GGUF / case / "q8_0.npz")
    assert main(["convert", str(GGUF / case / "q8_0.gguf"), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5
