"""The fam36j group of issue 36 (tests/fixtures/hf5_fam36j, made by transformers 5.25): what tests/test_hf_parity.py
(f32 at every position of the three prompts, q8_0 / q4_0 bounds), test_verify_families.py (`petit verify` at f32 /
q8_0 / q4_0) and the app's chat test do not already hold.

- The greedy continuation equals transformers'; the one-call plan equals the per-op path bit for bit (f32 and q8_0
  weights, f32 and int8 caches); decoding with the cache equals the whole sequence past the sliding windows.
- ModernBERT's decoder: what the family reads (no attention norm in layer 0, the layer types' windows and RoPE
  bases, Wi's halves, the prediction head between the final norm and the tied decoder), transformers 4's keys
  (global_attn_every_n_layers, global / local_rope_theta, the window from local_attention) and the saved
  sliding_window read over local_attention as transformers does, an untied decoder, its refusals by name.
- GIT: its folder says once, in its words, that the image tower is not run (and reports a tensor outside the tower
  and the decoder); BERT's post-LN blocks under a causal mask, learned positions, no final norm, the head's bias;
  the head tied by tie_word_embeddings; its refusals by name.
- A converted `.petit` file of each reloads and runs the same numbers (GIT's: a file of the decoder, no tower).
- CPM-Ant is refused naming what it is (a prefix language model) and the nearest family.
"""
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.loading.convert import convert
from models import assert_greedy_equals_transformers, TOWER_NOT_RUN, load_strict, rel_err
from test_moe_a5 import _read_safetensors, _write_safetensors
from test_plan import _assert_same

DIR = Path(__file__).parent / "fixtures" / "hf5_fam36j"
MBD, GIT = DIR / "modernbert-decoder", DIR / "git"
CASES = [MBD, GIT]
FOLDERS = pytest.mark.parametrize("folder", CASES, ids=[p.name for p in CASES])
F32_TOL = 1e-4
GIT_SAID = ("config: git: the image tower (vision_config: CLIP's vision model and its visual_projection) is not run; "
            "Petit runs the text decoder alone, so images cannot be given")


def _load(folder, weights="f32"):
    """petit.load with every warning an error but the tower's (GIT's folder says once that it is not run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        return petit.load(folder, weights=weights)


def _err(model, folder, prompt="reference"):
    ref = np.load(folder / f"{prompt}.npz")
    return rel_err(model.logits(ref["input_ids"]), ref["logits"]).max()


def _copy(src: Path, dst: Path, config: dict | None = None, tensors: dict | None = None) -> Path:
    """A copy of a fixture folder with its config.json and / or its tensors replaced."""
    shutil.copytree(src, dst)
    if config is not None:
        (dst / "config.json").write_text(json.dumps(config))
    if tensors is not None:
        _write_safetensors(dst / "model.safetensors", tensors)
    return dst


def _config(folder: Path, **changes) -> dict:
    return dict(json.loads((folder / "config.json").read_text()), **changes)


@FOLDERS
def test_greedy_continuation_equals_transformers(folder):
    assert_greedy_equals_transformers(_load(folder), folder)


@FOLDERS
@pytest.mark.parametrize("weights, kv", [("f32", "f32"), ("q8_0", "int8")])
def test_the_plan_equals_the_per_op_path(folder, weights, kv):
    _assert_same(_load(folder, weights), kv)


@FOLDERS
def test_decoding_with_the_cache_equals_the_whole_sequence(folder):
    model = _load(folder)
    ids = np.load(folder / "reference_long.npz")["input_ids"]
    whole = model.logits(ids)
    cache = model.new_cache(len(ids))
    steps = [model.forward(ids[:90], cache)] + [model.forward(ids[i:i + 1], cache) for i in range(90, len(ids))]
    assert rel_err(np.stack(steps), whole[89:]).max() <= 1e-5


@FOLDERS
def test_a_converted_file_runs_the_same_numbers(tmp_path, folder):
    out = tmp_path / "m.petit"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        convert(folder, out, "f32").close()
    m = load_strict(out)                    # GIT's file has no tower: nothing to say
    assert not any("image_encoder" in n or "visual_projection" in n for n in m.tensors)
    ids = np.load(folder / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(m.logits(ids), _load(folder).logits(ids))


# --- ModernBERT's decoder ---

def test_modernbert_decoder_reads_its_blocks_and_head():
    net = load_strict(MBD).net
    raw = _read_safetensors(MBD / "model.safetensors")
    assert [L.window for L in net.layers] == [0, 8, 8, 0]
    assert [L.rope.base for L in net.layers] == [160000.0, 10000.0, 10000.0, 160000.0]
    assert net.layers[0].attn_norm is None and all(L.attn_norm is not None for L in net.layers[1:])
    assert net.embed_norm is not None and net.embed_norm.b is not None and net.arch.act == "gelu"
    F = net.arch.intermediate_size
    for i, L in enumerate(net.layers):
        wi = raw[f"model.layers.{i}.mlp.Wi.weight"]
        np.testing.assert_array_equal(np.asarray(L.gate.stored()).view(np.float32).reshape(F, -1), wi[:F])
        np.testing.assert_array_equal(np.asarray(L.up.stored()).view(np.float32).reshape(F, -1), wi[F:])
        np.testing.assert_array_equal(L.gate_b.a, raw[f"model.layers.{i}.mlp.Wi.bias"][:F])
    hd = net.head_dense
    assert hd is not None and hd.act == "gelu" and hd.b is not None and hd.norm.kind == "layer"
    assert net.lm_head is net.embed and net.lm_head_b is not None        # tied, with the decoder's bias


def test_modernbert_decoder_reads_transformers_4s_keys():
    """A config as transformers 4 wrote ModernBERT's (no layer_types, no sliding_window, RoPE bases as
    global_rope_theta / local_rope_theta): the layers from global_attn_every_n_layers, the window local_attention // 2,
    the same logits."""
    d = {k: v for k, v in _config(MBD).items() if k not in ("layer_types", "sliding_window", "rope_parameters")}
    d.update(global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = petit.models.get_family("modernbert-decoder").Config.from_dict(d)
    assert cfg.types() == json.loads((MBD / "config.json").read_text())["layer_types"]
    assert (cfg.sliding_window, cfg.rope_theta, cfg.rope_local_base_freq) == (8, 160000.0, 10000.0)


def test_modernbert_decoder_runs_transformers_4s_config_the_same(tmp_path):
    d = {k: v for k, v in _config(MBD).items() if k not in ("layer_types", "sliding_window", "rope_parameters")}
    d.update(global_rope_theta=160000.0, local_rope_theta=10000.0)
    assert _err(load_strict(_copy(MBD, tmp_path / "m", d)), MBD) <= F32_TOL


def test_modernbert_decoder_reads_the_saved_window_over_local_attention(tmp_path):
    """transformers' config derives sliding_window = local_attention // 2, then sets the file's keys over it: a saved
    sliding_window is the window (local_attention 64 beside it changes nothing)."""
    m = load_strict(_copy(MBD, tmp_path / "m", _config(MBD, local_attention=64)))
    assert [L.window for L in m.net.layers] == [0, 8, 8, 0] and _err(m, MBD) <= F32_TOL


def test_modernbert_decoder_reads_an_untied_decoder(tmp_path):
    raw = _read_safetensors(MBD / "model.safetensors")
    raw["decoder.weight"] = raw["model.embeddings.tok_embeddings.weight"].copy()
    m = load_strict(_copy(MBD, tmp_path / "m", _config(MBD, tie_word_embeddings=False), raw))
    assert m.net.lm_head is not m.net.embed and _err(m, MBD) <= F32_TOL


@pytest.mark.parametrize("changes, message", [
    (dict(rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 160000.0},
                           "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
     "rope_scaling is not supported by the modernbert-decoder family"),
    (dict(local_attention=None, sliding_window=None), "sliding layers need a window: local_attention >= 2"),
    (dict(hidden_activation="quick_gelu"), "hidden_activation 'quick_gelu' is not supported by the "
                                           "modernbert-decoder family"),
    (dict(classifier_activation="tanh"), "classifier_activation 'tanh' is not supported"),
    (dict(num_attention_heads=5), "hidden_size 64 must be num_attention_heads 5 heads of an even size"),
])
def test_modernbert_decoder_refuses_by_name(changes, message):
    with pytest.raises(ValueError, match=message):
        petit.models.get_family("modernbert-decoder").Config.from_dict(_config(MBD, **changes))


# --- GIT ---

def test_git_says_once_that_its_image_tower_is_not_run():
    with pytest.warns(UserWarning) as caught:
        petit.load(GIT, weights="f32")
    assert [str(w.message) for w in caught] == [GIT_SAID]


def test_git_runs_bert_blocks_under_a_causal_mask():
    net = _load(GIT).net
    assert all(not L.bidirectional and L.rope is None and L.resid_attn_norm and L.resid_mlp_norm for L in net.layers)
    assert net.final_norm is None and net.embed_norm is not None and net.pos_embed.shape == (256, 64)
    assert net.lm_head is not net.embed and net.lm_head_b is not None and net.arch.act == "gelu"


def test_git_reports_a_tensor_outside_its_tower_and_decoder(tmp_path):
    raw = _read_safetensors(GIT / "model.safetensors")
    raw["git.extra.weight"] = np.zeros(4, np.float32)
    d = _copy(GIT, tmp_path / "m", tensors=raw)
    with pytest.warns(UserWarning) as caught:
        petit.load(d, weights="f32")
    assert [str(w.message) for w in caught][0] == GIT_SAID
    assert any("git.extra.weight" in str(w.message) for w in caught[1:])


def test_git_ties_its_head_by_tie_word_embeddings(tmp_path):
    """Tied (no output.weight in the file): the word embeddings are the head, as an untied file whose output.weight
    is a copy of them."""
    raw = _read_safetensors(GIT / "model.safetensors")
    del raw["output.weight"]
    tied = _load(_copy(GIT, tmp_path / "tied", _config(GIT, tie_word_embeddings=True), raw))
    raw["output.weight"] = raw["git.embeddings.word_embeddings.weight"].copy()
    untied = _load(_copy(GIT, tmp_path / "untied", None, raw))
    assert tied.net.lm_head is tied.net.embed and untied.net.lm_head is not untied.net.embed
    ids = np.load(GIT / "reference.npz")["input_ids"]
    np.testing.assert_array_equal(tied.logits(ids), untied.logits(ids))


def test_git_without_a_vision_config_says_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = petit.models.get_family("git").Config.from_dict(
            {k: v for k, v in _config(GIT).items() if k != "vision_config"})
    assert cfg.hidden_size == 64 and cfg.layer_norm_eps == 1e-12


@pytest.mark.parametrize("changes, message", [
    (dict(hidden_act="quick_gelu"), "hidden_act 'quick_gelu' is not supported by the git family"),
    (dict(num_attention_heads=5), "hidden_size 64 is not divisible by num_attention_heads 5"),
])
def test_git_refuses_by_name(changes, message):
    with pytest.raises(ValueError, match=message), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=TOWER_NOT_RUN)
        petit.models.get_family("git").Config.from_dict(_config(GIT, **changes))


# --- CPM-Ant ---

def test_cpmant_is_refused_naming_what_it_is():
    """transformers' CpmAntForCausalLM is a prefix language model (measured on a tiny one, cases.json's
    cpmant_refused: a position's logits move by 0.27 of their range when ten more tokens follow it in the call, a
    cached decode step is 0.037 of the range off a whole forward), with bucketed relative-position biases: refused,
    naming the nearest family."""
    with pytest.raises(ValueError, match=r"unsupported model_type 'cpmant'; the closest family Petit runs is llama "
                                         r"\(cpmant differs: a prefix language model as transformers runs it: 32 "
                                         r"learned prompt tokens"):
        petit.models.get_family("cpmant")
