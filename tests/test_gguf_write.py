"""`petit convert MODEL -o X.gguf`: GGUF files llama.cpp runs, with exactly Petit's weights.

- the files of tests/fixtures/gguf_written (every family a GGUF file can hold, f32 / q8_0 / q4_k_m) are written
  again byte for byte (their sha256), so llama.cpp's logits recorded there by make_llama_check.py (dev-only
  llama-cpp-python) are about these files: Petit reading each file gives llama.cpp's logits, and llama.cpp reading
  the f32 file gave transformers' within 1e-6 of the logit range;
- read back by Petit, a written file gives the model's own logits (f32: the same numbers up to summation order);
- a model a GGUF file cannot hold exactly is refused, naming the setting, and nothing is left behind;
- tokenizers: byte-level BPE (GPT-2's and Qwen's real vocabularies) read back to the same ids; SentencePiece is
  refused.
"""
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import unicodedata
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.cli import main
from petit.formats.gguf import GGUFFile
from petit.hf.gguf_tokenizer import tokenizer_from_gguf
from petit.hf.gguf_tokenizer_export import tokenizer_metadata
from petit.hf.tokenizer import HFTokenizer

from models import TINY, write_model

FIX = Path(__file__).parent / "fixtures"
WRITTEN = FIX / "gguf_written"
MANIFEST = json.loads((WRITTEN / "manifest.json").read_text())
FILES = sorted(MANIFEST["files"])


def convert(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "petit", "convert", *map(str, argv)], capture_output=True, text=True)


def _check_script():
    spec = importlib.util.spec_from_file_location("make_llama_check", WRITTEN / "make_llama_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("key", FILES)
def test_written_files_are_the_ones_llama_cpp_ran_and_give_its_logits(tmp_path, key):
    case, kind = key.split("/")
    out = tmp_path / f"{case}.gguf"
    script = _check_script()
    folder = script.folder_of(case, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # a variant's unused tensors
        assert main(["convert", str(folder), "-o", str(out), f"--{kind}", "--name", "Petit tiny fixture"]) == 0
    info = MANIFEST["files"][key]
    assert hashlib.sha256(out.read_bytes()).hexdigest() == info["sha256"], \
        "the writer's output changed: run tests/fixtures/gguf_written/make_llama_check.py (dev-only) again"
    if kind == "f32":          # llama.cpp ran the f32 file as transformers runs the checkpoint
        assert info["llama_cpp_vs_transformers"] <= (2e-4 if case in ("gpt2", "phi") else 1e-6)
    ref = np.load(script.reference_of(case))
    theirs = np.load(WRITTEN / "logits.npz")[key]
    ours = petit.load(out).logits(ref["input_ids"])[::MANIFEST["every"]]
    err = np.abs(ours - theirs).max() / np.ptp(theirs)
    # f32: the same sums in another order (gpt2, phi: llama.cpp's tabulated GELU); quantized: both engines round the
    # activations to int8 blocks, each its own way (measured 0.007-0.015 for q8_0, 0.013-0.028 for q4_k_m)
    assert err <= {"f32": 3e-4 if case in ("gpt2", "phi") else 5e-6, "q8_0": 0.03, "q4_k_m": 0.05}[kind]


@pytest.mark.parametrize("case", ["llama", "qwen2", "phi3", "gpt2", "cohere2", "phi", "stablelm"])
def test_read_back_it_is_the_same_model(tmp_path, case):
    out = tmp_path / "m.gguf"
    assert main(["convert", str(FIX / "hf" / case), "-o", str(out), "--f32"]) == 0
    ids = np.load(FIX / "hf" / case / "reference.npz")["input_ids"]
    folder, gguf = petit.load(FIX / "hf" / case, weights="f32"), petit.load(out)
    want = folder.logits(ids)
    assert np.abs(gguf.logits(ids) - want).max() <= 1e-5 * np.ptp(want)
    text = "hello world, <|im_start|>user\nwho?<|im_end|>"
    assert gguf.tokenizer.encode(text) == folder.tokenizer.encode(text)
    assert gguf.metadata.get("chat_template") == folder.metadata.get("chat_template")
    with GGUFFile(out) as f:
        assert f.metadata["general.architecture"] == {"phi": "phi2"}.get(case, case)
        assert f.metadata["general.file_type"] == 0


def test_gemma_norms_are_stored_as_llama_cpp_stores_them(tmp_path):
    """Gemma 2 with the settings llama.cpp records (tanh GELU, query_pre_attn_scalar = head_dim): its norms are
    written as 1 + w and read back as w."""
    folder = tmp_path / "gemma2"
    shutil.copytree(FIX / "hf" / "gemma2", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["query_pre_attn_scalar"] = cfg["head_dim"]
    (folder / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "g.gguf"
    assert main(["convert", str(folder), "-o", str(out), "--f32"]) == 0
    with GGUFFile(out) as f:
        norm = f.raw("blk.0.attn_norm.weight").view(np.float32)
    src = petit.load(folder, weights="f32")
    np.testing.assert_array_equal(norm, src.tensors["model.layers.0.input_layernorm.weight"][2] + np.float32(1))
    ids = list(range(1, 30))
    assert np.abs(petit.load(out).logits(ids) - src.logits(ids)).max() <= 1e-5 * np.ptp(src.logits(ids))


@pytest.mark.parametrize("case,why", [
    ("gemma", "hidden_act: 'gelu' here, 'gelu_pytorch_tanh' as read from GGUF"),
    ("gemma2", "query_pre_attn_scalar: 24 here, 16 as read from GGUF"),
    ("starcoder2", "sliding_window: 8 here, None as read from GGUF"),
    ("mistral", "sliding_window: 8 here, None as read from GGUF"),
])
def test_a_model_gguf_cannot_hold_is_refused_and_nothing_is_left(tmp_path, case, why):
    out = tmp_path / "m.gguf"
    r = convert(FIX / "hf" / case, "-o", out)
    assert r.returncode == 1
    assert r.stderr.startswith(f"petit convert: error: {FIX / 'hf' / case}: a GGUF file cannot hold this ")
    assert why in r.stderr and "its logits differ by" in r.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case,msg", [
    ("llama_dynamic", "RoPE scaling 'dynamic' has no GGUF form llama.cpp runs (it runs linear, yarn, llama3 and "
                      "longrope)"),
    ("cohere", "llama.cpp reads Command-R's q / k norms only in models of 64 layers or more (Command R+), and this "
               "one has 2: it would refuse the file"),
])
def test_what_has_no_gguf_form_is_refused(tmp_path, case, msg):
    r = convert(FIX / "hf" / case, "-o", tmp_path / "m.gguf")
    assert (r.returncode, r.stderr.strip()) == (1, f"petit convert: error: {FIX / 'hf' / case}: {msg}")
    assert list(tmp_path.iterdir()) == []


def test_k_quants_are_written_as_the_petit_file_holds_them(tmp_path):
    cfg = dict(TINY, hidden_size=256, intermediate_size=512, head_dim=64, num_hidden_layers=3)
    src = tmp_path / "f32.petit"
    write_model(src, cfg, "f32")
    assert main(["convert", str(src), "-o", str(tmp_path / "m.petit"), "--q4_k_m"]) == 0
    assert main(["convert", str(src), "-o", str(tmp_path / "m.gguf"), "--q4_k_m"]) == 0
    with GGUFFile(tmp_path / "m.gguf") as f:
        types = {n: t.type for n, t in f.tensors.items()}
        assert f.metadata["general.file_type"] == 15          # llama.cpp's MOSTLY_Q4_K_M
        # the same bytes: a v matrix is not permuted (only q and k are, for llama.cpp's RoPE)
        v = np.array(f.raw("blk.2.attn_v.weight"))
    assert types["output.weight"] == types["blk.2.attn_v.weight"] == types["blk.2.ffn_down.weight"] == "Q6_K"
    assert types["blk.0.attn_q.weight"] == types["blk.1.ffn_down.weight"] == "Q4_K"
    p = petit.load(tmp_path / "m.petit")
    assert v.tobytes() == np.asarray(p.tensors["model.layers.2.self_attn.v_proj.weight"][2]).tobytes()
    ids = list(range(3, 40))
    want = p.logits(ids)
    # read back with its q / k rows in the .petit file's order: the same rows compute the same bits
    from petit.loading.gguf import load_gguf
    same_rows = load_gguf(str(tmp_path / "m.gguf"), rope_halves=True)
    assert same_rows.config.rope_interleaved is False
    assert np.array_equal(same_rows.logits(ids), want)
    # read as llama.cpp reads it (q / k rows paired for its RoPE), decoded to float32: a head's dot products are
    # summed in another order, which int8 activations could round into 0.003 of the range, so floats compare here
    f32 = petit.load(tmp_path / "m.petit", weights="f32").logits(ids)
    assert np.abs(petit.load(tmp_path / "m.gguf", weights="f32").logits(ids) - f32).max() <= 1e-5 * np.ptp(f32)


def test_a_gguf_file_converts_to_gguf_keeping_its_types(tmp_path):
    src = FIX / "gguf" / "gpt2" / "q3_k.gguf"
    out = tmp_path / "m.gguf"
    assert main(["convert", str(src), "-o", str(out)]) == 0
    with GGUFFile(src) as a, GGUFFile(out) as b:
        assert {n: t.type for n, t in a.tensors.items()} == {n: t.type for n, t in b.tensors.items()}
        assert all(a.raw(n).tobytes() == b.raw(n).tobytes() for n in a.tensors)


def _hf_tokenizer(tmp_path, name):
    import gzip
    folder = tmp_path / name
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes(gzip.decompress((FIX / "tokenizers" / name / "tokenizer.json.gz")
                                                            .read_bytes()))
    shutil.copy(FIX / "tokenizers" / name / "tokenizer_config.json", folder)
    return HFTokenizer.from_folder(folder)


@pytest.mark.parametrize("name,pre", [("gpt2", "gpt-2"), ("qwen2", "qwen2")])
def test_real_byte_level_vocabularies_read_back_to_the_same_ids(tmp_path, name, pre):
    tok = _hf_tokenizer(tmp_path, name)
    meta = tokenizer_metadata(tok, name, tok.vocab_size + 7)
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] == pre
    assert meta["tokenizer.ggml.tokens"][-7:] == [f"[PAD{i}]" for i in range(tok.vocab_size, tok.vocab_size + 7)]
    back = tokenizer_from_gguf(meta, name)
    texts = json.loads((FIX / "tokenizers" / "qwen2" / "multilingual_inputs.json").read_text())["inputs"]
    for t in texts:    # in NFC: Qwen's NFC normalizer is dropped, as llama.cpp's converter drops it (llama.cpp
        text = unicodedata.normalize("NFC", t["text"])       # does not normalize: its own Qwen files split so too)
        assert back.encode(text) == tok.encode(text), t["id"]


def test_a_sentencepiece_vocabulary_is_refused(tmp_path):
    tok = _hf_tokenizer(tmp_path, "phi3")
    with pytest.raises(ValueError, match=r"^phi3: only byte-level BPE tokenizers can be written to GGUF \(this one "
                                         r"is BPE with byte fallback with a Sequence normalizer\)$"):
        tokenizer_metadata(tok, "phi3", tok.vocab_size)
