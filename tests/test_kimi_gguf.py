"""llama.cpp's `kimi-linear` GGUF file (tests/fixtures/gguf5_kimi: llama.cpp's own conversion of the hf5_hybrid
kimi_linear folder, its README says how), read as the kimi_linear family (petit/loading/gguf_kimi5.py)."""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit

GGUF = Path(__file__).parent / "fixtures" / "gguf5_kimi"
MANIFEST = json.loads((GGUF / "manifest.json").read_text())["cases"]
FILE = GGUF / "kimi_linear" / "q8_0.gguf"
FOLDER = Path(__file__).parent / "fixtures" / "hf5_hybrid" / "kimi_linear"


def _gguf(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return petit.load(FILE, **kw)


def _scaled(got, exact):
    return np.abs(got - exact).max() / (exact.max() - exact.min())


@pytest.fixture(scope="module")
def ref():
    return np.load(GGUF / "kimi_linear" / "q8_0.npz")


def test_llama_cpp_computes_transformers_model():
    """The fixture is worth checking against: llama.cpp's exact f32 run is transformers' model."""
    assert MANIFEST["kimi_linear"]["files"]["f32.gguf"]["exact_vs_transformers"]["rel"] <= 1e-4


def test_decoded_to_float_gives_llama_cpps_exact_logits(ref):
    got = _gguf(weights="f32").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5
    assert np.array_equal(got.argmax(1), ref["exact_logits"].argmax(1))


def test_as_stored_is_as_close_as_llama_cpps_own_run(ref):
    model = _gguf()
    assert model.weight_type == "q8_0"
    err, theirs = _scaled(model.logits(ref["input_ids"]), ref["exact_logits"]), _scaled(ref["logits"],
                                                                                         ref["exact_logits"])
    assert err <= 1.5 * theirs, (err, theirs)


def test_greedy_tokens_and_tokenizer_are_llama_cpps(ref):
    model = _gguf(weights="f32")
    cache = model.new_cache()
    logits = model.forward(ref["input_ids"], cache)
    out = []
    for _ in range(len(ref["exact_greedy"])):
        out.append(int(np.argmax(logits)))
        logits = model.forward([out[-1]], cache)
    assert out == ref["exact_greedy"].tolist()
    for t in MANIFEST["kimi_linear"]["tokenize"]:
        assert model.tokenizer.encode(t["text"]) == t["llama_cpp"], t["text"]


def test_reads_the_layout_of_the_folder():
    """The file's config is the folder's (layer kinds from head_count_kv, KDA sizes, the dense first layer, the
    routed experts), with the latent norms at the file's RMS eps as llama.cpp runs them."""
    model = _gguf(weights="f32")
    c = model.config
    folder = json.loads((FOLDER / "config.json").read_text())
    assert c.model_type == "kimi_linear" and c.layer_types == folder["layer_types"]
    assert c.mlp_layer_types == folder["mlp_layer_types"]
    for k in ("linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim", "kv_lora_rank", "qk_rope_head_dim",
              "qk_nope_head_dim", "v_head_dim", "moe_intermediate_size", "num_experts", "num_shared_experts"):
        assert getattr(c, k) == folder[k], k
    assert c.q_lora_rank is None and c.moe_renormalize
    assert np.float32(c.routed_scaling_factor) == np.float32(folder["routed_scaling_factor"])
    assert np.float32(c.latent_norm_eps) == np.float32(folder["rms_norm_eps"])
    net = model.net
    assert [L.mamba is not None for L in net.layers] == [t == "linear_attention" for t in folder["layer_types"]]


def test_a_softmax_router_is_refused(tmp_path):
    """kimi-linear's graph routes with expert_gating_func; the family runs Kimi's sigmoid only."""
    from petit.loading.gguf_archs import config_from_gguf
    from petit.formats.gguf import GGUFFile
    f = GGUFFile(FILE)
    meta = dict(f.metadata, **{"kimi-linear.expert_gating_func": 1})
    with pytest.raises(ValueError, match="sigmoid"):
        config_from_gguf(meta, "x.gguf", 320, f.tensors)


def test_converts_to_a_petit_file_with_the_same_logits(tmp_path, ref):
    from petit.cli import main
    from trainer.reference import Reference
    assert main(["convert", str(FILE), "-o", str(tmp_path / "m.petit"), "--f32"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = petit.load(tmp_path / "m.petit").logits(ref["input_ids"])
    assert _scaled(got, ref["exact_logits"]) <= 1e-5
    assert _scaled(Reference(tmp_path / "m.petit").logits(ref["input_ids"]), ref["exact_logits"]) <= 1e-5


@pytest.mark.parametrize("weights", [None, "f32", "q4_0"])
def test_petit_verify_passes_on_the_file(capsys, weights):
    """The engine on the file's weights (as stored q8_0, decoded to f32, requantized to q4_0) equals the float64
    reference on the same weights."""
    from petit.cli import main
    args = ["verify", str(FILE), "-n", "4"] + (["--weights", weights] if weights else [])
    assert main(args) == 0, capsys.readouterr().out
