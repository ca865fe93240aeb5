"""Tokenizers rebuilt from GGUF metadata (`petit.hf.gguf_tokenizer`) give llama.cpp's ids: every test string of
llama.cpp's own tokenizer tests for the vocabularies in tests/fixtures/gguf_vocab/ (see its README), and the ids of
the models' real Hugging Face tokenizers in tests/fixtures/tokenizers/."""
import gzip
import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from petit.formats.gguf import GGUFFile
from petit.hf.gguf_tokenizer import PRE_TOKENIZERS, tokenizer_from_gguf
from petit.hf.tokenizer import HFTokenizer

FIXTURES = Path(__file__).parent / "fixtures"
VOCABS = FIXTURES / "gguf_vocab"
SEPARATOR = "\n__ggml_vocab_test__\n"
# test name -> (GGUF file, metadata changed, test strings)
CASES = {"qwen2": ("qwen2", {}, "qwen2.gguf"), "gpt-2": ("gpt-2", {}, "gpt-2.gguf"),
         "phi-3": ("phi-3", {}, "phi-3.gguf"), "falcon": ("falcon", {}, "falcon.gguf"), "mpt": ("mpt", {}, "mpt.gguf"),
         "qwen35": ("qwen2", {"tokenizer.ggml.pre": "qwen35"}, "qwen35")}


def vectors(stem):
    """llama.cpp's test-tokenizer-0 reading of <stem>.inp / .out: strings each followed by the separator line."""
    raw = (VOCABS / f"{stem}.inp").read_bytes().decode("utf-8")
    assert raw.endswith(SEPARATOR)
    texts = raw[:-len(SEPARATOR)].split(SEPARATOR)
    lines = (VOCABS / f"{stem}.out").read_bytes().decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(texts) >= 46
    return [(text, [int(x) for x in line.split()]) for text, line in zip(texts, lines)]


@pytest.fixture(scope="module")
def metadata(tmp_path_factory):
    root, out = tmp_path_factory.mktemp("gguf_vocab"), {}
    for name in sorted({f for f, _, _ in CASES.values()}):
        path = root / f"{name}.gguf"
        path.write_bytes(gzip.decompress((VOCABS / f"{name}.gguf.gz").read_bytes()))
        with GGUFFile(path) as f:
            assert f.tensors == {}
            out[name] = f.metadata
    return out


class _Tokenizers(dict):
    """Each case's tokenizer built on first use, once per module (Qwen's takes two seconds)."""
    def __init__(self, metadata):
        super().__init__()
        self.metadata = metadata

    def __missing__(self, case):
        name, change, _ = CASES[case]
        self[case] = tokenizer_from_gguf({**self.metadata[name], **change}, f"{name}.gguf")
        return self[case]


@pytest.fixture(scope="module")
def toks(metadata):
    return _Tokenizers(metadata)


def hf_fixture(name):
    return HFTokenizer(gzip.decompress((FIXTURES / "tokenizers" / name / "tokenizer.json.gz").read_bytes()).decode())


# ---------------------------------------------------------------- llama.cpp's test vectors

@pytest.mark.parametrize("case", CASES)
def test_ids_equal_llama_cpps_test_vectors(toks, case):
    tok = toks[case]
    for text, ids in vectors(CASES[case][2]):
        assert tok.encode(text) == ids, text                                  # adds nothing: no BOS
        assert tok.hf_encode(text, add_special_tokens=False) == ids, text
        assert tok.encode(text, allow_special=False) == ids, text             # no special token texts in them
        assert tok.decode(ids) == text, text                                  # every one decodes back


def test_vectors_are_those_of_the_hugging_face_fixtures():
    for gguf, hf in (("qwen2", "qwen2"), ("gpt-2", "gpt2"), ("phi-3", "phi3")):
        for ext in ("inp", "out"):
            assert (VOCABS / f"{gguf}.gguf.{ext}").read_bytes() == (FIXTURES / "tokenizers" / hf / f"vectors.{ext}").read_bytes()


@pytest.mark.parametrize("gguf, hf", [("gpt-2", "gpt2"), ("qwen2", "qwen2"), ("phi-3", "phi3")])
def test_ids_equal_the_real_hugging_face_tokenizers(toks, gguf, hf):
    ref = hf_fixture(hf)
    inputs = json.loads((FIXTURES / "tokenizers" / "qwen2" / "multilingual_inputs.json").read_text("utf-8"))["inputs"]
    texts = [e["text"] for e in inputs] + [t for t, _ in vectors(f"{gguf}.gguf")]
    for text in texts:
        if hf == "qwen2":           # Qwen's tokenizer.json normalizes to NFC first; llama.cpp (and so ours) does not
            text = unicodedata.normalize("NFC", text)
        assert toks[gguf].encode(text) == ref.encode(text), text


def test_llama_vocab_merges_are_those_of_hugging_faces_conversion(toks):
    ours = json.loads(toks["phi-3"].to_dict()["tokenizer_json"])["model"]
    ref = json.loads(gzip.decompress((FIXTURES / "tokenizers" / "phi3" / "tokenizer.json.gz").read_bytes()))["model"]
    assert ours["merges"] == ref["merges"] and len(ours["merges"]) == 61249
    assert ours["vocab"] == ref["vocab"] and ours["byte_fallback"] is True


# ---------------------------------------------------------------- special tokens, BOS and EOS

def test_control_tokens_are_special_added_tokens(toks):
    tok = toks["qwen2"]
    text = "<|im_start|>user\nhi<|im_end|>\n"
    assert tok.encode(text) == [151644, 872, 198, 6023, 151645, 198]
    assert tok.token_to_id("<|im_start|>") == 151644 and tok.token_to_id("<|endoftext|>") == 151643
    assert {151643, 151644, 151645} <= tok.special_ids
    assert tok.encode(text, allow_special=False) == [27, 91, 318, 4906, 91, 29, 872, 198, 6023, 27, 91, 318, 6213, 91, 397]
    assert tok.decode(tok.encode(text)) == text and tok.decode(tok.encode(text), skip_special=True) == "user\nhi\n"
    assert tok.token_bytes(151644) == b"<|im_start|>"
    # user-defined tokens are added tokens too, but not special
    assert tok.encode("a[PAD151646]b") == [64, 151646, 65] and 151646 not in tok.special_ids
    assert (tok.bos_token, tok.eos_token, tok.pad_token) == ("<|endoftext|>",) * 3
    assert tok.config["extra_special_tokens"] == ["<|im_end|>"]    # the end-of-turn token llama.cpp detects


def test_end_of_generation_texts_become_control_tokens_as_in_llama_cpp(toks):
    # Qwen's plain "</s>" (byte-level merges) is one of llama.cpp's end-of-generation texts: a control token
    assert toks["qwen2"].encode("a</s>b") == [64, 128247, 65]
    assert toks["qwen2"].encode("a</s>b", allow_special=False) == [64, 522, 82, 51407]


def test_bos_and_eos_as_llama_cpp_adds_them(toks, metadata):
    phi3, qwen = toks["phi-3"], toks["qwen2"]
    assert phi3.adds_bos and phi3.hf_encode("Hello world") == [1, 15043, 3186] and phi3.encode("Hello world") == [15043, 3186]
    assert (phi3.bos_token, phi3.eos_token, phi3.unk_token, phi3.pad_token) == ("<s>", "<|endoftext|>", "<unk>", "<|endoftext|>")
    assert not qwen.adds_bos and qwen.hf_encode("hi") == [6023]
    tok = tokenizer_from_gguf({**metadata["phi-3"], "tokenizer.ggml.add_bos_token": False,
                               "tokenizer.ggml.add_eos_token": True}, "phi-3.gguf")
    assert not tok.adds_bos and tok.add_eos_token and tok.hf_encode("Hello world") == [15043, 3186, 32000]
    # defaults when the file does not say: the llama model adds a BOS, gpt-2 style ones only for the Llama 3 family
    meta = {k: v for k, v in metadata["phi-3"].items() if not k.startswith("tokenizer.ggml.add_")}
    assert tokenizer_from_gguf(meta, "x").adds_bos
    assert tokenizer_from_gguf({**metadata["gpt-2"], "tokenizer.ggml.pre": "llama-bpe"}, "x").hf_encode("hi") == [50256, 5303]


def test_phi3_special_tokens_swallow_the_white_space_after_them_as_in_llama_cpp(toks, metadata):
    tok = toks["phi-3"]
    assert tok.encode("<|user|>\nHi<|end|>\n<|assistant|>") == [32010, 6324, 32007, 32001]
    other = tokenizer_from_gguf({**metadata["phi-3"], "general.name": "other"}, "x")    # llama.cpp goes by the name
    assert other.encode("<|user|>\nHi<|end|>\n<|assistant|>") == [32010, 29871, 13, 18567, 32007, 29871, 13, 32001]


def test_add_space_prefix_false(toks, metadata):
    tok = tokenizer_from_gguf({**metadata["phi-3"], "tokenizer.ggml.add_space_prefix": False}, "x")
    assert tok.encode(" Hello world") == toks["phi-3"].encode("Hello world") == [15043, 3186]
    assert tok.encode("Hello") == [10994] and tok.decode([15043]) == " Hello"


# ---------------------------------------------------------------- pre-tokenizers

def test_every_pre_tokenizer_regex_compiles_and_keeps_every_character():
    from tokenizers import Regex, pre_tokenizers
    text = "Hello  World's 1234567 ÉCOLE école\n\n\t  x == y; 你好世界 한국어 Ωμέγα 𝔘 ! ...?  \r\n"
    for name, spec in PRE_TOKENIZERS.items():
        pieces = [text]
        for regex in spec["regexes"]:
            split = pre_tokenizers.Split(Regex(regex), "isolated")
            pieces = [p for piece in pieces for p, _ in split.pre_tokenize_str(piece)]
        assert "".join(pieces) == text, name


def test_pre_tokenizers_split_digits_as_llama_cpp_does(metadata):
    def tokens(pre, text):
        tok = tokenizer_from_gguf({**metadata["gpt-2"], "tokenizer.ggml.pre": pre}, "x")
        return [tok.id_to_token(i) for i in tok.encode(text)]
    assert tokens("llama-bpe", "1234567") == ["123", "456", "7"]
    assert tokens("qwen2", "1234567") == list("1234567")
    assert tokens("gpt-2", " 1234567") == ["Ġ123", "45", "67"]         # one piece, as GPT-2 merges it
    assert tokens("default", "") == [] and tokens("starcoder", "x 42") == ["x", "Ġ", "4", "2"]


# ---------------------------------------------------------------- errors

def test_unknown_model_and_pre_tokenizer(metadata):
    with pytest.raises(ValueError) as e:
        tokenizer_from_gguf({**metadata["gpt-2"], "tokenizer.ggml.model": "t5"}, "model.gguf")
    assert str(e.value) == ("model.gguf: tokenizer.ggml.model 't5' is not supported (supported: 'gpt2', 'llama', "
                            "'bert')")
    with pytest.raises(ValueError) as e:
        tokenizer_from_gguf({k: v for k, v in metadata["gpt-2"].items() if k != "tokenizer.ggml.model"}, "m.gguf")
    assert str(e.value) == "m.gguf: tokenizer.ggml.model None is not supported (supported: 'gpt2', 'llama', 'bert')"
    supported = ("a.x-4.0, bailingmoe, bailingmoe2, bloom, chameleon, chatglm-bpe, codeshell, cohere2moe, command-r, dbrx, "
                 "deepseek-coder, deepseek-llm, deepseek-r1-qwen, deepseek-v3, default, exaone, exaone-moe, exaone4, f2llmv2, "
                 "falcon, falcon-h1, falcon3, gigachat, glm4, glm5, gpt-2, gpt-4o, gpt3-finnish, granite-docling, "
                 "granite-embed-multi-97m, grok-2, hunyuan, hunyuan-dense, hy_v4, jais, jais-2, jina-de, jina-es, jina-v1-en, "
                 "jina-v2-code, jina-v2-de, jina-v2-es, jina-v5-nano, joyai-llm, kanana2, kormo, laguna, lfm2, llada-moe, "
                 "llama-bpe, llama-v3, llama3, llama4, megrez, mellum, mellum2, midm-2.0, minerva-7b, minicpm5, minimax-m2, "
                 "modern-bert, mpt, olmo, phi-2, pixtral, poro-chat, qwen2, qwen35, refact, roberta-bpe, seed-coder, "
                 "smaug-bpe, smollm, solar-open, spark2_5, stablelm2, starcoder, talkie, tekken, tiny_aya, trillion, "
                 "ufakzeka, viking, youtu")
    with pytest.raises(ValueError) as e:
        tokenizer_from_gguf({**metadata["gpt-2"], "tokenizer.ggml.pre": "qwen9"}, "model.gguf")
    assert str(e.value) == f"model.gguf: tokenizer.ggml.pre 'qwen9' is not a pre-tokenizer llama.cpp knows (supported: {supported})"
    with pytest.raises(ValueError) as e:
        tokenizer_from_gguf({**metadata["gpt-2"], "tokenizer.ggml.pre": "kimi-k2"}, "model.gguf")
    assert str(e.value) == ("model.gguf: tokenizer.ggml.pre 'kimi-k2' needs llama.cpp's own code, which Hugging Face "
                            f"tokenizers cannot express (supported: {supported})")
    assert len(PRE_TOKENIZERS) == 84


def test_missing_and_mismatched_arrays(metadata):
    gpt2, phi3 = metadata["gpt-2"], metadata["phi-3"]
    cases = [
        ({k: v for k, v in gpt2.items() if k != "tokenizer.ggml.tokens"},
         "g.gguf: tokenizer.ggml.tokens must be an array of strings (it is missing)"),
        ({**gpt2, "tokenizer.ggml.tokens": np.arange(3)},
         "g.gguf: tokenizer.ggml.tokens must be an array of strings (got ndarray)"),
        ({**gpt2, "tokenizer.ggml.tokens": []}, "g.gguf: tokenizer.ggml.tokens is empty"),
        ({**gpt2, "tokenizer.ggml.tokens": ["a", "b", "a"], "tokenizer.ggml.token_type": np.ones(3, np.int32)},
         "g.gguf: tokenizer.ggml.tokens has the token 'a' twice (ids 0 and 2)"),
        ({k: v for k, v in gpt2.items() if k != "tokenizer.ggml.merges"},
         "g.gguf: tokenizer.ggml.merges must be an array of strings (it is missing)"),
        ({**gpt2, "tokenizer.ggml.merges": ["Ġ t", "Ġt"]},
         "g.gguf: tokenizer.ggml.merges[1] 'Ġt' is not two tokens separated by a space"),
        ({**gpt2, "tokenizer.ggml.token_type": gpt2["tokenizer.ggml.token_type"][:-1]},
         "g.gguf: tokenizer.ggml.token_type has 50256 entries for the 50257 tokens of tokenizer.ggml.tokens"),
        ({**phi3, "tokenizer.ggml.scores": phi3["tokenizer.ggml.scores"][:10]},
         "g.gguf: tokenizer.ggml.scores has 10 entries for the 32064 tokens of tokenizer.ggml.tokens"),
        ({**phi3, "tokenizer.ggml.scores": ["x"] * 32064},
         "g.gguf: tokenizer.ggml.scores must be an array of numbers, got list"),
        ({**phi3, "tokenizer.ggml.token_type": np.ones(32064, np.float32)},
         "g.gguf: tokenizer.ggml.token_type must be an array of numbers, got ndarray of float32"),
        ({**phi3, "tokenizer.ggml.add_bos_token": 1}, "g.gguf: tokenizer.ggml.add_bos_token must be a bool, got 1"),
        ({**gpt2, "tokenizer.ggml.add_eos_token": True, "tokenizer.ggml.eos_token_id": 10 ** 6,
          "tokenizer.ggml.tokens": gpt2["tokenizer.ggml.tokens"][:11]},
         "g.gguf: tokenizer.ggml.add_eos_token is true but the vocabulary has no EOS token"),
    ]
    for meta, message in cases:
        with pytest.raises(ValueError) as e:
            tokenizer_from_gguf(meta, "g.gguf")
        assert str(e.value) == message


def test_llama_cpp_tolerances(metadata):
    # an empty token is named as llama.cpp names it; a special id out of range keeps the default (gpt2: 11)
    tokens = list(metadata["gpt-2"]["tokenizer.ggml.tokens"])
    tokens[300] = ""
    tok = tokenizer_from_gguf({**metadata["gpt-2"], "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.bos_token_id": 10 ** 6,
                               "tokenizer.ggml.add_bos_token": True}, "x")
    assert tok.id_to_token(300) == "[EMPTY_300]" and tok.hf_encode("hi") == [11, 5303]


def tiny_gpt2_metadata(extra, types=None):
    """A byte-level vocabulary: the 256 byte characters (ids 0..255), then `extra` (all normal unless `types`)."""
    from petit.tokenizer import bytes_to_unicode
    tokens = [bytes_to_unicode()[b] for b in range(256)] + list(extra)
    kinds = np.array([1] * 256 + list(types or [1] * len(extra)), np.int32)
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2", "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": kinds, "tokenizer.ggml.merges": []}


def test_token_types_llama_cpp_overrides_by_text():
    extra = ["<|channel|>", "<|return|>", "<|call|>", "<|end|>", "<|im_end|>", "<|fim_prefix|>", "<x>", "<y>", "<z>"]
    tok = tokenizer_from_gguf(tiny_gpt2_metadata(extra, [1, 1, 1, 1, 1, 1, 3, 4, 5]), "tiny.gguf")
    ids = {t: 256 + i for i, t in enumerate(extra)}
    # end-of-generation and fill-in-the-middle texts become control tokens (special); gpt-oss's <|channel|> and,
    # with <|return|> and <|call|> present, <|end|> are user-defined (added, not special); an unused one is plain
    assert tok.special_ids == {ids[t] for t in ("<|return|>", "<|call|>", "<|im_end|>", "<|fim_prefix|>", "<x>")}
    assert tok.encode("a<|channel|>b<|end|><y><z>") == [ord("a"), ids["<|channel|>"], ord("b"), ids["<|end|>"], ids["<y>"],
                                                         *[ord(c) for c in "<z>"]]
    assert tok.encode("<|im_end|>", allow_special=False) == [ord(c) for c in "<|im_end|>"]
    assert tok.encode("<|end|>", allow_special=False) == [ids["<|end|>"]]             # user-defined: still a token
    assert tok.config["extra_special_tokens"] == ["<|im_end|>"] and tok.eos_token is None    # eos: default 11 is plain
    assert tok.decode(tok.encode("x<|return|> é")) == "x<|return|> é"


def test_merges_of_tokens_the_vocabulary_lacks_are_left_out():
    # llama.cpp cannot make a token from such a merge either; Hugging Face's BPE would refuse the whole vocabulary.
    # The vocabulary goes to tokenizers' BPE directly (not as JSON), refused merges and all, then without them.
    meta = tiny_gpt2_metadata(["ab", "abc"])
    meta["tokenizer.ggml.merges"] = ["a b", "ab c", "b c", "ab x"]       # "bc" and "x" are not tokens
    tok = tokenizer_from_gguf(meta, "tiny.gguf")
    assert tok.encode("abc") == [257] and tok.encode("bc") == [ord("b"), ord("c")]
    assert json.loads(tok._tk.to_str())["model"]["merges"] == [["a", "b"], ["ab", "c"]]
