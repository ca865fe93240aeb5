"""GGUF embedding files as llama.cpp writes them (issue 35, the gemb35 group): llama.cpp 0.3.36's conversions of tiny
random sentence-transformers folders (tests/fixtures/gguf5_gemb35, made by its make_gguf5_gemb35.py from
tests/fixtures/src_gemb35): `bert` (mean pooling, uncased WordPiece), `bert_cls` (CLS pooling, cased), `nomic`
(`nomic-bert`, mean), `qwen3` and `qwen2` (last token), each f32, f16 and q8_0, beside llama.cpp's own vectors and
token ids (llama-cpp-python, embedding=True, the file's pooling) and sentence-transformers' on the source folder."""
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.formats.gguf import GGUFFile, write_gguf
from petit.generation.embed import Embedder
from petit.hf.gguf_tokenizer import tokenizer_from_gguf, wordpiece_vocab
from petit.hf.tokenizer import import_tokenizers

Tokenizer = import_tokenizers().Tokenizer

FIX = Path(__file__).parent / "fixtures"
GGUF, SRC = FIX / "gguf5_gemb35", FIX / "src_gemb35"
MANIFEST = json.loads((GGUF / "manifest.json").read_text())
TEXTS, TOKENIZE = MANIFEST["texts"], MANIFEST["tokenize"]
CASES = ("bert", "bert_cls", "nomic", "qwen3", "qwen2")
WORDPIECE = ("bert", "bert_cls", "nomic")
HANGUL = ("한국어 텍스트",)
LONG = 3             # TEXTS[3] is 155 tokens for qwen3 / qwen2, past their 128-token context
# the smallest cosine to each reference over TEXTS: (llama.cpp's run of the same file, sentence-transformers')
# (the goals: 0.9999 in float, 0.999 in q8_0; these tiny random matrices quantize worse than trained ones)
BOUNDS = {"f32": (0.99999, 0.99999), "f16": (0.99999, 0.99999), "q8_0": (0.999, 0.999)}


def _open(case, kind, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # read without any "ignoring ..." report
        return Embedder.open(GGUF / case / f"{kind}.gguf", **kw)


def _cos(a, b):
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


def test_the_cases_are_the_architectures_llama_cpp_wrote():
    archs = {}
    for case in CASES:
        with GGUFFile(GGUF / case / "f32.gguf") as f:
            m = f.metadata
            archs[case] = (m["general.architecture"], m[f"{m['general.architecture']}.pooling_type"],
                           m["tokenizer.ggml.model"])
    assert archs == {"bert": ("bert", 1, "bert"), "bert_cls": ("bert", 2, "bert"),
                     "nomic": ("nomic-bert", 1, "bert"), "qwen3": ("qwen3", 3, "gpt2"),
                     "qwen2": ("qwen2", 3, "gpt2")}


@pytest.mark.parametrize("case", WORDPIECE)
def test_the_phantom_space_vocabulary_is_undone_into_the_folders(case):
    """llama.cpp's converter stores "▁" + a word-initial token and a ## continuation without its ##; undone, the
    tokens are the folder's WordPiece vocabulary (then the converter's [PAD<i>] rows up to vocab_size)."""
    with GGUFFile(GGUF / case / "f32.gguf") as f:
        texts, types = f.metadata["tokenizer.ggml.tokens"], f.metadata["tokenizer.ggml.token_type"].tolist()
    folder = json.loads((SRC / case / "tokenizer.json").read_text())["model"]["vocab"]
    undone = wordpiece_vocab(texts, types)
    assert undone[:len(folder)] == sorted(folder, key=folder.get)
    assert undone[len(folder):] == [f"[PAD{i}]" for i in range(len(folder), len(texts))]
    assert any(t.startswith("##") for t in undone) and not any(t.startswith("\u2581") for t in undone)


def test_wordpiece_vocab_keeps_control_tokens_and_gives_back_the_bare_continuation_mark():
    assert wordpiece_vocab(["[CLS]", "\u2581the", "ing", "", "\u2581[unused0]"], [3, 1, 1, 1, 1]) == \
        ["[CLS]", "the", "##ing", "##", "[unused0]"]


@pytest.mark.parametrize("case", WORDPIECE)
def test_wordpiece_ids_are_llama_cpps_and_the_folders(case):
    """Accents (stripped when uncased, kept when cased), punctuation, CJK characters one a word, words falling into
    ## pieces, unknown words, a 150-letter word (no length limit, as llama.cpp), control characters, white space of
    every kind (\v, \f, U+0085 split words as in llama.cpp), special tokens in the text; framed by [CLS] ... [SEP]
    as llama.cpp's add_special. Hangul in an accent-stripping vocabulary is the model tokenizer's, not llama.cpp's."""
    with GGUFFile(GGUF / case / "f32.gguf") as f:
        tok = tokenizer_from_gguf(f.metadata, case)
    ref, st = np.load(GGUF / case / "f32.npz"), np.load(SRC / case / "reference.npz")
    for i, text in enumerate(TEXTS):
        ids = tok.hf_encode(text, add_special_tokens=True)
        assert ids == ref[f"ids_{i}"].tolist() == st[f"ids_{i}"].tolist(), text
    folder = Tokenizer.from_file(str(SRC / case / "tokenizer.json"))
    for i, text in enumerate(TOKENIZE):
        ids, theirs = tok.hf_encode(text, add_special_tokens=True), ref[f"tok_{i}"].tolist()
        if text in HANGUL and case != "bert_cls":
            # accents stripped: llama.cpp's NFD keeps one code point a character, so a Hangul syllable loses its
            # vowel and final jamo; Petit decomposes it whole, as the model's tokenizer does
            assert ids == folder.encode(text).ids != theirs, text
        else:
            assert ids == theirs, text
    unk = tok.encode("Ωmega")
    assert unk == [1] and tok.encode("xylophonequartzjib") != unk


def test_the_uncased_vocabulary_strips_accents_and_the_cased_keeps_them():
    toks = {}
    for case in ("bert", "bert_cls"):
        with GGUFFile(GGUF / case / "f32.gguf") as f:
            toks[case] = tokenizer_from_gguf(f.metadata, case)
    assert toks["bert"].decode(toks["bert"].encode("Ça va? Où est le café")) == "ca va? ou est le cafe"
    assert toks["bert_cls"].decode(toks["bert_cls"].encode("Ça va? Où est le café")) == "Ça va? Où est le café"


@pytest.mark.parametrize("kind", ("f32", "f16", "q8_0"))
@pytest.mark.parametrize("case", CASES)
def test_vectors_are_llama_cpps_and_sentence_transformers(case, kind):
    emb = _open(case, kind)
    ref, st = np.load(GGUF / case / f"{kind}.npz"), np.load(SRC / case / "reference.npz")
    got = emb.embed(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-6)
    fits = [i for i in range(len(TEXTS)) if not (case.startswith("qwen") and i == LONG)]
    for i in fits:
        assert emb.tokenize(TEXTS[i]) == ref[f"ids_{i}"].tolist()
    to_llama = min(_cos(got[i], ref[f"emb_{i}"]) for i in fits)
    to_st = min(_cos(got[i], st["plain"][i]) for i in range(len(TEXTS)))
    assert to_llama >= BOUNDS[kind][0] and to_st >= BOUNDS[kind][1], (to_llama, to_st)


@pytest.mark.parametrize("case", ("bert", "bert_cls"))
def test_bert_runs_the_models_erf_gelu_where_llama_cpp_looks_up_f16_tanh(case):
    """llama.cpp's bert MLP is ggml_gelu (tanh form, from a table of f16 inputs): its vectors are some 1e-4 of their
    size from sentence-transformers'. Petit runs the model's erf GELU: sentence-transformers' to float32 rounding,
    llama.cpp's within that gap."""
    emb = _open(case, "f32")
    assert emb.model.config.hidden_act == "gelu"
    ref, st = np.load(GGUF / case / "f32.npz"), np.load(SRC / case / "reference.npz")
    got = emb.embed(TEXTS)
    for i in range(len(TEXTS)):
        theirs = ref[f"emb_{i}"] / np.linalg.norm(ref[f"emb_{i}"])
        assert np.abs(got[i] - st["plain"][i]).max() <= 1e-6
        gap = np.abs(theirs - st["plain"][i]).max()
        assert 1e-6 < gap <= 5e-4 and np.abs(got[i] - theirs).max() <= 1.5 * gap


@pytest.mark.parametrize("case, pooling, kind", [("bert", "mean", "encoder"), ("bert_cls", "cls", "encoder"),
                                                 ("nomic", "mean", "encoder"), ("qwen3", "lasttoken", "decoder"),
                                                 ("qwen2", "lasttoken", "decoder")])
def test_pooling_and_normalization_come_from_the_file(case, pooling, kind):
    emb = _open(case, "q8_0")
    assert (emb.settings.pooling, emb.settings.normalize, emb.model.kind) == ((pooling,), True, kind)
    assert emb.dimension == emb.model.net.arch.hidden_size and emb.settings.prompts == {}
    raw = emb.embed(TEXTS[:2], normalize=False)
    ref = np.load(GGUF / case / "q8_0.npz")
    for i in range(2):                      # unnormalized: llama.cpp's own scale
        np.testing.assert_allclose(np.linalg.norm(raw[i]), np.linalg.norm(ref[f"emb_{i}"]), rtol=2e-3)


def test_a_text_past_the_context_keeps_its_eos_as_sentence_transformers_does():
    """Qwen3's vector is its last token's, the appended <|endoftext|>: Petit cuts a text past the context (128) as
    sentence-transformers does, keeping it; llama-cpp-python's embed(truncate=True) cuts the ids, dropping it (its
    vector differs, so it is left out of the comparison above)."""
    emb, ref = _open("qwen3", "f32"), np.load(GGUF / "qwen3" / "f32.npz")
    ids, theirs = emb.tokenize(TEXTS[LONG]), ref[f"ids_{LONG}"].tolist()       # theirs: before embed's cut
    assert len(theirs) == 155 and theirs[-1] == 0 and theirs[127] != 0
    assert len(ids) == 128 and ids == theirs[:127] + [0]
    st = np.load(SRC / "qwen3" / "reference.npz")["plain"][LONG]
    assert _cos(emb.embed(TEXTS[LONG])[0], st) >= 0.99999


def _rewrite(tmp_path, case, **changes):
    """A copy of the case's q8_0 file with metadata keys changed (None: removed)."""
    with GGUFFile(GGUF / case / "q8_0.gguf") as f:
        meta = dict(f.metadata)
        for k, v in changes.items():
            k = k.replace("__", ".")
            if v is None:
                meta.pop(k)
            else:
                meta[k] = v
        tensors = {name: (t.type, t.shape, np.array(f.raw(name))) for name, t in f.tensors.items()}
    write_gguf(tmp_path / "x.gguf", meta, tensors)
    return tmp_path / "x.gguf"


@pytest.mark.parametrize("case, changes, message", [
    ("bert", {"bert__pooling_type": None}, "not an embedding model: the file has no pooling_type key"),
    ("qwen3", {"qwen3__pooling_type": None}, "not an embedding model: the file has no pooling_type key"),
    ("bert", {"bert__pooling_type": np.uint32(0)}, r"pooling_type 0 \(none: a vector per token\) is not supported: "
                                                   r"Petit embeds with mean \(1\), CLS \(2\) or last-token \(3\)"),
    ("qwen3", {"qwen3__pooling_type": np.uint32(4)}, r"pooling_type 4 \(rank: a reranker's relevance score\)"),
    ("nomic", {"nomic-bert__pooling_type": np.uint32(7)}, r"pooling_type 7 \(unknown\) is not supported"),
])
def test_a_file_without_a_text_pooling_is_refused(tmp_path, case, changes, message):
    path = _rewrite(tmp_path, case, **changes)
    with pytest.raises(ValueError, match=message):
        Embedder.open(path)


def test_a_causal_bert_file_is_refused(tmp_path):
    path = _rewrite(tmp_path, "bert", bert__attention__causal=True)
    with pytest.raises(ValueError, match="'bert.attention.causal' is true: the bert family runs a bidirectional"):
        petit.load(path)


def test_a_wordpiece_vocabulary_without_its_frame_is_refused():
    with GGUFFile(GGUF / "bert" / "f32.gguf") as f:
        meta = dict(f.metadata)
    meta["tokenizer.ggml.tokens"] = ["[PAD]", "\u2581a"]
    meta["tokenizer.ggml.token_type"] = np.array([3, 1], np.int32)
    with pytest.raises(ValueError, match=r"x: the WordPiece vocabulary has no BOS \(\[CLS\]\) token"):
        tokenizer_from_gguf(meta, "x")


def test_an_encoder_file_refuses_logits_and_the_api_and_cli_embed_it(capsys):
    path = GGUF / "bert" / "q8_0.gguf"
    model = petit.load(path)
    with pytest.raises(ValueError, match="is an encoder"):
        model.logits([2, 3])
    got = petit.embed(str(path), ["hello", "What is the capital of France?"])
    np.testing.assert_array_equal(got, _open("bert", "q8_0").embed(["hello", "What is the capital of France?"]))
    from petit.cli import main
    assert main(["embed", str(path), "hello", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dimension"] == 64 and np.allclose(out["embeddings"][0], got[0], atol=1e-6)


def test_the_server_embeds_with_a_gguf_file():
    """`petit serve CHAT --embedding-model X.gguf`: /v1/embeddings gives the Embedder's vectors; /api/tags names the
    file's format and size."""
    pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import httpx
    from petit.server.embeddings import EmbeddingService
    from tests.test_embed5_server import floats, serve
    path = GGUF / "nomic" / "q8_0.gguf"
    service = EmbeddingService(str(path)).load()
    assert service.model_id == "q8_0.gguf"
    want = service.embedder.embed(TEXTS[:2])
    n = [len(service.embedder.tokenize(t)) for t in TEXTS[:2]]
    server = serve(service)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60) as c:
            r = c.post("/v1/embeddings", json={"model": "q8_0.gguf", "input": TEXTS[:2]})
            tag = c.get("/api/tags").json()["models"][1]
    finally:
        server.stop()
    assert r.json() == {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": floats(v)}
                                                   for i, v in enumerate(want)],
                        "model": "q8_0.gguf", "usage": {"prompt_tokens": sum(n), "total_tokens": sum(n)}}
    assert (tag["size"], tag["details"]["format"], tag["details"]["family"]) == \
        (path.stat().st_size, "gguf", "nomic_bert")


@pytest.mark.parametrize("value, shown", [(np.int32(4), "4 (rank: a reranker's relevance score)"),
                                          (True, "True (unknown)"), ("mean", "'mean' (unknown)")])
def test_a_malformed_pooling_value_is_named(value, shown):
    from petit.generation.embed_config import gguf_settings
    with pytest.raises(ValueError, match=re.escape(f"f.gguf: pooling_type {shown} is not supported")):
        gguf_settings({"pooling_type": value}, "f.gguf")
    assert gguf_settings({"pooling_type": np.uint32(2)}, "f.gguf").pooling == ("cls",)


def test_info_names_the_files_pooling(capsys):
    from petit.cli import main
    assert main(["info", str(GGUF / "bert_cls" / "q8_0.gguf")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3:5] == ["architecture:   bert", "runs in Petit:  yes"]
    assert lines[-1] == "embeddings:     pooling_type 2 (cls pooling)"
