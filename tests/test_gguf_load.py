"""GGUF files made by llama.cpp's own converter and quantizer from the Hugging Face fixtures (tests/fixtures/gguf,
with llama.cpp's logits beside each file) run in Petit as in llama.cpp:

- every architecture's f16 file gives llama.cpp's exact logits (its run on the file's weights in float32, an f32 KV
  cache) within 1e-5 of the logit range (1e-3 where llama.cpp computes GELU from an f16 table), and the same greedy
  tokens: tensor names, config, RoPE (adjacent pairs for llama.cpp's permuted Llama files, long-rope factor
  tables, partial rotary, NoPE layers), Gemma's stored 1 + w norms, fused q|k|v and gate|up are all read right;
- a quantized file stays as close to those exact logits as llama.cpp itself does (both quantize the activations):
  for the types Petit multiplies as stored (Q8_0, Q4_0) within 1.5x llama.cpp's own distance; for the types it
  decodes at load and runs as q8_0 (Q4_1 ... Q6_K, IQ4_NL), which round twice, within 2.5x;
- the tokenizer gives llama.cpp's ids, the chat template comes along, a type Petit cannot read is refused by name,
  and `petit convert FILE.gguf` writes a .petit file that runs to the same bits.
"""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit import native as K
from petit.cli import main

ROOT = Path(__file__).parent / "fixtures" / "gguf"
MANIFEST = json.loads((ROOT / "manifest.json").read_text())["cases"]
FILES = [(case, name) for case, e in MANIFEST.items() for name in e.get("files", {})]
GELU_TABLE = {"gemma", "gemma2", "gpt2", "gpt_neox", "starcoder2"}     # llama.cpp's GELU reads an f16 table
FLOAT = {"f32", "f16", "bf16"}
NATIVE = {"q8_0", "q4_0"}
REFUSED = {("gpt2", "tq1_0.gguf")}


def _load(case, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = petit.load(ROOT / case / name)
    return model, [str(w.message) for w in caught]


@pytest.mark.parametrize("case, name", [f for f in FILES if f not in REFUSED])
def test_logits_are_llama_cpps(case, name):
    ref = np.load(ROOT / case / name.replace(".gguf", ".npz"))
    model, warned = _load(case, name)
    got = model.logits(ref["input_ids"])
    exact, default = ref["exact_logits"], ref["logits"]
    scale = exact.max() - exact.min()
    err, theirs = np.abs(got - exact).max() / scale, np.abs(default - exact).max() / scale
    kind = name.split(".")[0]
    if kind in FLOAT:
        assert err <= (1e-3 if case in GELU_TABLE else 1e-5), err
        assert np.array_equal(got.argmax(1), exact.argmax(1))
    else:      # the types run as stored round once, like llama.cpp; the decoded ones twice (theirs, then q8_0)
        once = kind in NATIVE or set(MANIFEST[case]["files"][name]["matrix_types"]) <= {"Q8_0", "Q4_0"} | {
            t for t in K.gguf_fast_types()}
        assert err <= (1.5 if once else 2.5) * theirs, (err, theirs)
    # the types neither stored as Petit's nor multiplied as stored by this path's K-quant kernels are decoded
    stored = {"F32", "F16", "BF16", "Q8_0", "Q4_0"} | K.gguf_fast_types()
    types = set(MANIFEST[case]["files"][name]["tensor_types"].values())
    assert ("decoded at load" in " ".join(warned)) == bool(types - stored), (warned, types)


def test_iq4_xs_kept_as_stored_rounds_once_like_llama_cpp():
    """IQ4_XS runs as stored by default on x86 (its kernel decodes as fast as q8_0 in half the memory), decoded to
    q8_0 where asked (gguf_stored=False); as stored its logits stay as close to llama.cpp's exact ones as llama.cpp's
    own run (one rounding, not two)."""
    path = ROOT / "gpt2" / "iq4_xs.gguf"
    ref = np.load(path.with_suffix(".npz"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stored, default, decoded = (petit.load(path, gguf_stored=True), petit.load(path),
                                    petit.load(path, gguf_stored=False))
    if "IQ4_XS" not in K.gguf_simd_types():
        pytest.skip(f"the {K.info()['isa']} path has no IQ4_XS kernel")
    assert {W.dtype for W in stored.net.matrices()} >= {"iq4_xs"} and "iq4_xs" not in {
        W.dtype for W in decoded.net.matrices()}
    assert ("iq4_xs" in {W.dtype for W in default.net.matrices()}) == ("IQ4_XS" in K.gguf_fast_types())
    exact = ref["exact_logits"]
    scale = exact.max() - exact.min()
    theirs = np.abs(ref["logits"] - exact).max() / scale
    assert np.abs(stored.logits(ref["input_ids"]) - exact).max() / scale <= 1.5 * theirs


@pytest.mark.parametrize("case", sorted({c for c, n in FILES if n == "f16.gguf"}))
def test_greedy_tokens_are_llama_cpps(case):
    ref = np.load(ROOT / case / "f16.npz")
    model, _ = _load(case, "f16.gguf")
    cache = model.new_cache()
    logits = model.forward(ref["input_ids"], cache)
    out = []
    for _ in range(len(ref["exact_greedy"])):
        out.append(int(np.argmax(logits)))
        logits = model.forward([out[-1]], cache)
    assert out == ref["exact_greedy"].tolist()


@pytest.mark.parametrize("case", sorted({c for c, n in FILES if n == "f16.gguf"}))
def test_tokenizer_and_template_are_the_files(case):
    model, _ = _load(case, "f16.gguf")
    for t in MANIFEST[case]["tokenize"]:               # llama.cpp's tokenizer, special tokens parsed, no BOS
        assert model.tokenizer.encode(t["text"]) == t["llama_cpp"], t["text"]
    hf_config = json.loads((Path(__file__).parent / "fixtures" / "hf" / case / "tokenizer_config.json").read_text())
    if "chat_template" in hf_config:
        assert model.metadata["chat_template"] == hf_config["chat_template"]


def test_a_type_petit_cannot_read_is_refused_by_name():
    with pytest.raises(ValueError) as e:
        petit.load(ROOT / "gpt2" / "tq1_0.gguf")
    assert str(e.value) == (
        f"{ROOT / 'gpt2' / 'tq1_0.gguf'}: tensor 'blk.0.ffn_down.weight' is TQ1_0, a type Petit cannot read (it reads "
        f"F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS and MXFP4)")


def _relabelled(tmp_path, arch):
    from petit.formats.gguf import GGUFFile, write_gguf
    with GGUFFile(ROOT / "qwen2" / "f16.gguf") as f:
        meta = {k: v for k, v in f.metadata.items() if not k.startswith("qwen2.")}
        meta["general.architecture"] = arch
        write_gguf(tmp_path / "x.gguf", meta, {"token_embd.weight": ("F16", f.tensors["token_embd.weight"].shape,
                                                                     f.raw("token_embd.weight"))})
    return tmp_path / "x.gguf"


def test_an_architecture_petit_does_not_read_lists_the_ones_it_does(tmp_path):
    from petit.loading.gguf_archs import ARCHS
    # an invented name: llama.cpp's architectures are read or refused with their reason (XVERSE, once the stand-in,
    # is read since issue 36's fam36r group)
    path = _relabelled(tmp_path, "made-up-arch")
    with pytest.raises(ValueError) as e:
        petit.load(path)
    assert str(e.value) == (f"{path}: architecture 'made-up-arch' is not supported by Petit's GGUF reader (supported: "
                            f"{', '.join(sorted(ARCHS))})")
    assert {"llama", "qwen2", "gemma3", "mamba2", "deepseek2", "bloom"} <= set(ARCHS)


def test_an_architecture_that_is_not_a_decoder_is_refused_saying_what_it_is(tmp_path):
    path = _relabelled(tmp_path, "modern-bert")     # bert and nomic-bert are read (tests/test_gemb35.py)
    with pytest.raises(ValueError) as e:
        petit.load(path)
    assert str(e.value) == (f"{path}: architecture 'modern-bert' is an encoder (embeddings), not a decoder-only "
                            f"language model, and not one of the embedding encoders Petit reads (bert, nomic-bert); "
                            f"Petit runs decoder-only language models")


@pytest.mark.parametrize("name", ["q4_k.gguf", "q8_0.gguf", "q3_k.gguf"])
def test_convert_writes_a_petit_file_that_runs_to_the_same_bits(tmp_path, name, capsys):
    out = tmp_path / "m.petit"
    assert main(["convert", str(ROOT / "gpt2" / name), "-o", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    # Q4_K (gpt2's two ffn_down) and llama.cpp's fallback for rows of 64, Q5_0, are kept as stored: a .petit file
    # holds them; Q3_K does not, and becomes q8_0 (beside the Q4_0 of llama.cpp's fallback)
    kind = {"q4_k.gguf": "q5_0", "q8_0.gguf": "q8_0", "q3_k.gguf": "q4_0"}[name]
    assert err[-1].startswith(f"petit convert: {out}: gpt2, 0.1M parameters, {kind} weights, ")
    if name == "q3_k.gguf":
        assert err[:-1] == [f"petit: warning: {ROOT / 'gpt2' / name}: 2 tensor(s) stored as Q3_K were decoded "
                            f"at load and run as q8_0 (only the types a .petit file holds were asked for)"]
    else:
        assert err[:-1] == []
    ids = np.load(ROOT / "gpt2" / name.replace(".gguf", ".npz"))["input_ids"]
    # both loaded as petit.load loads them: the types the path runs fastest as stored, the rest decoded to q8_0; the
    # GGUF file's Q3_K, which x86 keeps as stored and a .petit file cannot hold, decoded to q8_0 as convert did
    gguf = petit.load(ROOT / "gpt2" / name, **({"gguf_stored": False} if name == "q3_k.gguf" else {}))
    converted = petit.load(out)
    assert {t for t, *_ in converted.tensors.values()} == {t for t, *_ in gguf.tensors.values()}
    assert converted.tokenizer.encode("hello world") == gguf.tokenizer.encode("hello world")
    np.testing.assert_array_equal(converted.logits(ids), gguf.logits(ids))


def test_info_describes_a_gguf_file(capsys):
    assert main(["info", str(ROOT / "llama" / "q4_0.gguf")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:5] == ["format:         GGUF v3", "name:           Petit tiny fixture", "architecture:   llama",
                          "runs in Petit:  yes"]
    assert lines[6].startswith("tensor types:   Q4_0 16 (") and ", F32 5 (" in lines[6]
    assert lines[-3:-1] == ["context:        128", "tokenizer:      gpt2 (gpt-2), 320 tokens"]


@pytest.mark.parametrize("case", sorted({c for c, n in FILES if n == "f16.gguf"}) + ["llama/q4_1"])
def test_petit_verify_passes_on_the_files(case, capsys):
    """The independent float64 reference (trainer/reference) agrees with the engine on llama.cpp's files too: it
    once ignored rope_interleaved for Granite and SmolLM3, which only llama.cpp's permuted files set."""
    path = ROOT / (case if "/" in case else f"{case}/f16")
    assert main(["verify", f"{path}.gguf"]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.splitlines()[-1] == "VERIFY PASS"


@pytest.mark.skipif(not {"Q4_K", "Q5_0"} <= K.gguf_simd_types(), reason="needs the x86 GGUF kernels")
@pytest.mark.parametrize("kw, why", [
    (dict(weights="f32"), "run as f32 (weights='f32' was asked for)"),
    (dict(gguf_stored=False), "run as q8_0 (gguf_stored=False was asked for)"),
])
def test_the_decoding_note_names_what_the_user_asked_for(kw, why):
    """Decoded because the caller asked, not because this CPU lacks a kernel: the note says so."""
    path = ROOT / "gpt2" / "q4_k.gguf"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        petit.load(path, **kw)
    assert [str(w.message) for w in caught] == [
        f"{path}: 14 tensor(s) stored as Q4_K, Q5_0 were decoded at load and {why}"]


def test_the_decoding_note_claims_speed_only_where_it_was_measured():
    """x86's choice to decode Q5_0, IQ4_XS ... to q8_0 was measured; NEON's kernels were checked bit for bit under an
    emulator only, so an ARM load says so instead of claiming speed."""
    tail = "; petit.load(..., gguf_stored=True) keeps them as stored, in less memory"
    assert K.gguf_decode_reason("avx2") == "it runs them faster so" + tail
    assert K.gguf_decode_reason("neon") == ("its NEON kernels for them are not yet measured against q8_0's on ARM "
                                            "hardware" + tail)


def test_q5_0_runs_as_q8_0_by_default_and_as_stored_when_asked():
    """A Q4_K_M file whose rows are not whole super-blocks is mostly Q5_0 (llama.cpp's fallback): decoded to q8_0 it
    runs at the interleaved kernel's speed, which a user is told along with how to keep the file's size instead."""
    path = ROOT / "gpt2" / "q4_k.gguf"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = petit.load(path)
        small = petit.load(path, gguf_stored=True)
    assert sorted(W.dtype for W in fast.net.matrices()) == ["q4_k"] * 2 + ["q8_0"] * 11
    assert sorted(W.dtype for W in small.net.matrices()) == ["q4_k"] * 2 + ["q5_0"] * 11
    assert [str(w.message) for w in caught] == [
        f"{path}: 12 tensor(s) stored as Q5_0 were decoded at load and run as q8_0 (it runs them faster so; "
        f"petit.load(..., gguf_stored=True) keeps them as stored, in less memory)"]
    ref = np.load(ROOT / "gpt2" / "q4_k.npz")
    exact, theirs = ref["exact_logits"], ref["logits"]
    scale = exact.max() - exact.min()
    limit = np.abs(theirs - exact).max() / scale
    # as stored, the values round once as in llama.cpp; decoded, twice (Q5_0, then q8_0)
    assert np.abs(small.logits(ref["input_ids"]) - exact).max() / scale <= 1.5 * limit
    assert np.abs(fast.logits(ref["input_ids"]) - exact).max() / scale <= 2.5 * limit


@pytest.mark.skipif(not {"Q2_K", "Q3_K"} <= K.gguf_fast_types(), reason="needs the x86 Q2_K / Q3_K kernels")
@pytest.mark.parametrize("name, kind", [("q2_k.gguf", "q2_k"), ("q3_k.gguf", "q3_k")])
def test_q2_k_and_q3_k_run_as_stored(name, kind):
    """llama.cpp's Q2_K / Q3_K matrices (gpt2's two ffn_down) are kept as stored on x86, with no note, a third of
    their q8_0 size, and round once as in llama.cpp: within 1.5x its own distance from the exact logits, where the
    same file decoded to q8_0 is held to 2.5x."""
    path = ROOT / "gpt2" / name
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stored = petit.load(path)
        assert [str(w.message) for w in caught] == []
        decoded = petit.load(path, gguf_stored=False)
    assert [str(w.message) for w in caught] == [f"{path}: 2 tensor(s) stored as {kind.upper()} were decoded at load "
                                                f"and run as q8_0 (gguf_stored=False was asked for)"]
    assert sorted(W.dtype for W in stored.net.matrices() if W.dtype == kind) == [kind] * 2
    assert sorted(W.dtype for W in decoded.net.matrices() if W.dtype != "q4_0") == ["q8_0"] * 2
    small = sum(W.raw.nbytes for W in stored.net.matrices() if W.dtype == kind)
    big = sum(W.raw.nbytes for W in decoded.net.matrices() if W.dtype == "q8_0")
    assert small / big == {"q2_k": 84 / 272, "q3_k": 110 / 272}[kind]
    ref = np.load(str(path).replace(".gguf", ".npz"))
    exact, theirs = ref["exact_logits"], ref["logits"]
    scale = exact.max() - exact.min()
    limit = np.abs(theirs - exact).max() / scale
    assert np.abs(stored.logits(ref["input_ids"]) - exact).max() / scale <= 1.5 * limit
    assert np.abs(decoded.logits(ref["input_ids"]) - exact).max() / scale <= 2.5 * limit


def test_info_says_how_each_type_loads_on_this_path(capsys):
    """Which of a file's types run as stored and which are decoded at load depends on the CPU's path: `petit info`
    says it before a load does, and a type Petit cannot read makes the file one it does not run."""
    def info(name, isa):
        K.configure(isa=isa)
        try:
            assert main(["info", str(ROOT / "gpt2" / name)]) == 0
        finally:
            K.configure()
        return capsys.readouterr().out.splitlines()
    x86 = next((p for p in ("avx512", "avxvnni", "avx2") if p in K.info()["supported"]), None)
    if x86:
        assert info("q4_k.gguf", x86)[7] == f"at load:        F32, Q4_K as stored; Q5_0 decoded to q8_0 (on the {x86} path)"
    assert info("q4_k.gguf", "scalar")[7] == "at load:        F32 as stored; Q5_0, Q4_K decoded to q8_0 (on the scalar path)"
    lines = info("tq1_0.gguf", "scalar")
    assert lines[4] == "runs in Petit:  no: tensor type(s) TQ1_0 are not ones Petit reads"
    assert lines[7] == "at load:        Q4_0, F32 as stored; TQ1_0 refused (on the scalar path)"
