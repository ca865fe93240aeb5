"""Tests for petit.hf.tokenizer (Hugging Face tokenizers) and petit.formats.metadata (a folder's side files), against
the ids, tokens and texts Hugging Face's own libraries give for the real tokenizers in tests/fixtures/tokenizers/."""

import gzip
import json
import random
import re
import unicodedata
from pathlib import Path

import pytest

from petit.chat.template import render_template
from petit.formats.metadata import read_folder_metadata
from petit.hf.tokenizer import HFStreamDecoder, HFTokenizer, tokenizer_from_dict
from petit.generation.sample import Sampler, resolve
from petit.tokenizer import Tokenizer, TokenizerProtocol, bytes_to_unicode

FIXTURES = Path(__file__).parent / "fixtures" / "tokenizers"
NAMES = ("gpt2", "qwen2", "phi3")
SEPARATOR = "\n__ggml_vocab_test__\n"


def vectors(name):
    texts = (FIXTURES / name / "vectors.inp").read_text(encoding="utf-8").split(SEPARATOR)[:-1]
    lines = (FIXTURES / name / "vectors.out").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(texts) == len(lines) == 46
    return [(text, [int(x) for x in line.split()]) for text, line in zip(texts, lines)]


def multilingual(name):
    inputs = json.loads((FIXTURES / "qwen2" / "multilingual_inputs.json").read_text(encoding="utf-8"))["inputs"]
    path = FIXTURES / name / "multilingual_baseline.json"
    baseline = json.loads(path.read_text(encoding="utf-8"))["entries"] if path.exists() else {}
    return [(e["id"], e["text"], baseline.get(e["id"])) for e in inputs]


class _Tokenizers(dict):
    """Each fixture tokenizer loaded on first use, once per module (Qwen's takes about a second)."""
    def __init__(self, folders):
        super().__init__()
        self.folders = folders

    def __missing__(self, name):
        self[name] = HFTokenizer.from_folder(self.folders[name])
        return self[name]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root, out = tmp_path_factory.mktemp("hf"), {}
    for name in NAMES:
        folder = out[name] = root / name
        folder.mkdir()
        (folder / "tokenizer.json").write_bytes(gzip.decompress((FIXTURES / name / "tokenizer.json.gz").read_bytes()))
        for side in ("tokenizer_config.json", "chat_template.jinja"):
            if (FIXTURES / name / side).exists():
                (folder / side).write_bytes((FIXTURES / name / side).read_bytes())
    return out


@pytest.fixture(scope="module")
def toks(folders):
    return _Tokenizers(folders)


def tiny_tokenizer_json():
    """A byte-level BPE with ids 0..255 = bytes, merges making "Ġthe" (256..258) and <|endoftext|> = 259."""
    from tokenizers import AddedToken, Tokenizer as Fast, decoders, models, pre_tokenizers
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)} | {"Ġt": 256, "he": 257, "Ġthe": 258}
    fast = Fast(models.BPE(vocab, [("Ġ", "t"), ("h", "e"), ("Ġt", "he")]))
    fast.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    fast.decoder = decoders.ByteLevel()
    fast.add_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    return fast.to_str()


def tiny_folder(path, config=None, special_map=None):
    path.mkdir(exist_ok=True)
    (path / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    for name, value in (("tokenizer_config.json", config), ("special_tokens_map.json", special_map)):
        if value is not None:
            (path / name).write_text(json.dumps(value), encoding="utf-8")
    return path


# ---------------------------------------------------------------- parity with Hugging Face

@pytest.mark.parametrize("name", NAMES)
def test_vectors_equal_hugging_face(toks, name):
    tok = toks[name]
    for text, ids in vectors(name):
        assert tok.encode(text) == ids, text
        assert tok.hf_encode(text, add_special_tokens=False) == ids, text


@pytest.mark.parametrize("name", ["gpt2", "qwen2"])
def test_multilingual_baselines_equal_hugging_face(toks, name):
    tok = toks[name]
    cases = multilingual(name)
    assert len(cases) == 30 and all(b is not None for _, _, b in cases)
    for key, text, b in cases:
        ids = tok.hf_encode(text)               # with special tokens, as the model's tokenizer adds them
        assert ids == b["input_ids"], key
        assert [tok.id_to_token(i) for i in ids] == b["tokens"], key
        assert tok.decode(ids) == b["decoded_with_special"], key
        assert tok.decode(ids, skip_special=True) == b["decoded_skip_special"], key


@pytest.mark.parametrize("name", NAMES)
def test_decode_round_trips(toks, name):
    tok = toks[name]
    for text in [t for t, _ in vectors(name)] + [t for _, t, _ in multilingual(name)]:
        expected = unicodedata.normalize("NFC", text) if name == "qwen2" else text   # Qwen normalizes to NFC
        assert tok.decode(tok.encode(text)) == expected


@pytest.mark.parametrize("name", NAMES)
def test_streaming_gives_the_full_decode_and_never_a_replacement_character(toks, name):
    tok = toks[name]
    texts = [t for _, t, _ in multilingual(name)] + [t for t, _ in vectors(name)]
    held = 0
    for text in texts:
        ids = tok.encode(text)
        stream = tok.stream_decoder()
        pieces = [stream.push(i) for i in ids]
        held += pieces.count("")
        assert not any("\ufffd" in p for p in pieces), text
        assert "".join(pieces) + stream.flush() == tok.decode(ids), text
    assert held > 0          # multibyte characters really were split across tokens


def test_stream_holds_split_characters_and_skips_specials(toks):
    phi3 = toks["phi3"]
    ids = phi3.encode("a🦙")                 # byte fallback: <0xF0> <0x9F> <0xA6> <0x99>
    assert [phi3.id_to_token(i) for i in ids[-4:]] == ["<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"]
    stream = phi3.stream_decoder()
    assert [stream.push(i) for i in ids] == ["a", "", "", "", ""] and stream.flush() == "🦙"   # the run may go on
    assert [stream.push(i) for i in ids + ids] == ["a", "", "", "", "", "🦙 a", "", "", "", ""]
    assert stream.flush() == "🦙"
    assert stream.push(ids[1]) == "" and stream.flush() == "\ufffd"    # a dangling partial character
    assert stream.push(ids[0]) == "a"                                    # usable again after flush
    qwen = toks["qwen2"]
    ids = qwen.encode("<|im_start|>assistant\n你好🦙<|im_end|>")
    for skip, expected in ((True, "assistant\n你好🦙"), (False, "<|im_start|>assistant\n你好🦙<|im_end|>")):
        stream = qwen.stream_decoder(skip)
        assert isinstance(stream, HFStreamDecoder)
        pieces = [stream.push(i) for i in ids]
        assert "".join(pieces) + stream.flush() == expected and "\ufffd" not in "".join(pieces)
    with pytest.raises(ValueError, match="out of range"):
        qwen.stream_decoder().push(qwen.vocab_size)


@pytest.mark.parametrize("name", ["gpt2", "phi3"])
def test_streaming_any_ids_gives_the_full_decode(toks, name):
    tok, rng = toks[name], random.Random(0)
    high_bytes = [i for i in range(tok.vocab_size) if len(tok.token_bytes(i)) == 1 and tok.token_bytes(i)[0] >= 0x80]
    for _ in range(150):       # random ids, half of them lone high bytes: split, completed and broken characters
        ids = [rng.choice(high_bytes) if rng.random() < 0.5 else rng.randrange(tok.vocab_size)
               for _ in range(rng.randrange(1, 12))]
        for skip in (False, True):
            stream = tok.stream_decoder(skip)
            assert "".join(stream.push(i) for i in ids) + stream.flush() == tok.decode(ids, skip_special=skip), ids


# ---------------------------------------------------------------- BOS, special tokens, lookups

def test_chat_encoding_matches_apply_chat_template_without_a_double_bos(toks, folders):
    tok = toks["phi3"]
    assert (tok.bos_token, tok.bos_id, tok.eos_token, tok.add_bos_token, tok.add_eos_token) == \
        ("<s>", 1, "<|endoftext|>", True, False)
    template = (folders["phi3"] / "chat_template.jinja").read_text(encoding="utf-8")
    text = render_template(template, [{"role": "user", "content": "hi"}], add_generation_prompt=True,
                           bos_token=tok.bos_token, eos_token=tok.eos_token)
    ids = tok.encode(text)
    assert text.startswith("<s><|user|>") and ids[:2] == [1, tok.token_to_id("<|user|>")]
    assert ids == tok.hf_encode(text, add_special_tokens=False)        # what apply_chat_template(tokenize=True) does
    assert tok.hf_encode(text)[:2] == [1, 1]                            # what add_special_tokens=True would do
    plain = tok.encode("Hello world")
    assert 1 not in plain and tok.encode("Hello world", add_bos=False) == plain
    assert tok.encode("Hello world", add_bos=True) == [1] + plain == tok.hf_encode("Hello world")


def test_bos_less_tokenizer(toks):
    tok = toks["qwen2"]
    assert (tok.bos_token, tok.bos_id, tok.eos_id, tok.add_bos_token, tok.pad_token) == \
        (None, None, 151645, False, "<|endoftext|>")
    with pytest.raises(ValueError, match=r"^add_bos=True but this tokenizer has no bos_token$"):
        tok.encode("hi", add_bos=True)
    assert tok.encode("hi") == tok.hf_encode("hi") == [6023]


def test_allow_special_false_encodes_special_texts_as_plain_text(toks):
    tok = toks["qwen2"]
    text = "a<|im_end|>b"
    assert tok.encode(text) == [64, 151645, 65]
    plain = tok.encode(text, allow_special=False)
    assert 151645 not in plain and tok.decode(plain) == text
    assert tok.encode(text) == [64, 151645, 65]          # the switch does not stick


def test_vocab_size_lookups_and_errors(toks):
    qwen, gpt2, phi3 = toks["qwen2"], toks["gpt2"], toks["phi3"]
    assert (qwen.vocab_size, gpt2.vocab_size, phi3.vocab_size) == (151646, 50257, 32064)
    assert qwen.special_tokens == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] and qwen.model_max_length == 32768
    assert qwen.token_to_id("<|im_end|>") == 151645 and qwen.id_to_token(151645) == "<|im_end|>"
    assert gpt2.token_to_id("Ġthe") == 262 and gpt2.token_to_id("no such token") is None
    assert gpt2.model_max_length is None                # transformers' int(1e30) means no limit
    with pytest.raises(ValueError, match=r"^token id 50257 is out of range for a vocab of 50257 tokens$"):
        gpt2.decode([50257])
    with pytest.raises(ValueError, match=r"^token id must be an int, got True$"):
        gpt2.id_to_token(True)
    with pytest.raises(ValueError, match=r"^cannot encode character '\\ud800' \(U\+D800\) at index 1: a lone "
                                         r"surrogate has no UTF-8 form$"):
        gpt2.encode("a\ud800")
    with pytest.raises(ValueError, match=r"^text must be a str, got bytes$"):
        gpt2.encode(b"a")


def test_token_bytes(toks):
    gpt2, phi3 = toks["gpt2"], toks["phi3"]
    assert gpt2.token_bytes(262) == b" the" and gpt2.token_bytes(50256) == b"<|endoftext|>"
    ids = gpt2.encode("é🦙")
    assert gpt2.decode_bytes(ids) == "é🦙".encode() and gpt2.decode_bytes(ids[:-1]) == "é🦙".encode()[:-1]
    assert phi3.token_bytes(phi3.token_to_id("<0xE4>")) == b"\xe4"
    assert phi3.token_bytes(phi3.token_to_id("▁Hello")) == b" Hello" and phi3.token_bytes(1) == b"<s>"
    assert phi3.decode_bytes(phi3.encode("<s>Hi"), skip_special=True) == b" Hi"   # decode() strips that space


# ---------------------------------------------------------------- storage in a .petit file

def test_to_dict_from_dict_round_trip(toks):
    name = "phi3"                # a post-processor that adds <s>, byte fallback, added tokens
    tok = toks[name]
    d = json.loads(json.dumps(tok.to_dict()))
    assert d["type"] == "hf" and isinstance(d["tokenizer_json"], str) and set(d) == {"type", "tokenizer_json", "config"}
    again = tokenizer_from_dict(d)
    assert isinstance(again, HFTokenizer) and again.to_dict() == d
    for attr in ("vocab_size", "bos_id", "eos_id", "special_ids", "add_bos_token", "model_max_length"):
        assert getattr(again, attr) == getattr(tok, attr)
    for _, text, _ in multilingual(name):
        assert again.encode(text) == tok.encode(text) and again.hf_encode(text) == tok.hf_encode(text)


def test_tokenizer_from_dict_dispatch_and_errors():
    petit = {"vocab": ["a", "b"], "type": "char"}
    assert type(tokenizer_from_dict(petit)) is Tokenizer
    good = {"type": "hf", "tokenizer_json": tiny_tokenizer_json()}
    assert tokenizer_from_dict(good).vocab_size == 260
    for d, message in [
        ([], r"^tokenizer description must be a dict, got list$"),
        (good | {"extra": 1}, r"^tokenizer dict has unknown keys: 'extra'$"),
        (good | {"config": {"chat_template": "x"}}, r"^config has unknown keys: 'chat_template'$"),
        (good | {"tokenizer_json": '{"model": '}, r"^tokenizer_json: invalid JSON at line 1, column 11: "
                                                  r"Expecting value$"),
        (good | {"tokenizer_json": '{"model": {}}'}, r"^tokenizer_json: not a Hugging Face tokenizer: "),
        (good | {"tokenizer_json": None}, r"^tokenizer_json must be the text of a tokenizer.json, got NoneType$"),
    ]:
        with pytest.raises(ValueError, match=message):
            HFTokenizer.from_dict(d)


# ---------------------------------------------------------------- tokenizer_config.json and the folder's files

def test_tokenizer_config_adds_tokens_as_transformers_does(tmp_path):
    config = {
        "added_tokens_decoder": {
            "259": {"content": "<|endoftext|>", "special": True},
            "260": {"content": "<|im_start|>", "special": True, "normalized": False},
            "261": {"content": "<|im_end|>", "special": True, "normalized": False},
            "262": {"content": "<think>", "special": False, "normalized": False},
        },
        "bos_token": {"__type": "AddedToken", "content": "<|endoftext|>"},
        "eos_token": "<|im_end|>", "pad_token": None, "extra_special_tokens": ["<tool>"],
        "model_max_length": 4096, "add_bos_token": False,
    }
    tok = HFTokenizer.from_folder(tiny_folder(tmp_path, config))
    assert (tok.vocab_size, tok.bos_id, tok.eos_id, tok.pad_id, tok.model_max_length) == (264, 259, 261, None, 4096)
    assert tok.token_to_id("<tool>") == 263 and tok.special_ids == {259, 260, 261, 263}
    ids = tok.encode("<|im_start|> the<think><tool><|im_end|>")
    assert ids == [260, 258, 262, 263, 261]
    assert tok.decode(ids, skip_special=True) == " the<think>"
    assert tok.decode(ids) == "<|im_start|> the<think><tool><|im_end|>"
    assert HFTokenizer.from_dict(tok.to_dict()).encode("x<|im_end|>") == [ord("x"), 261]


def test_special_tokens_map(tmp_path):
    legacy = HFTokenizer.from_folder(tiny_folder(tmp_path / "a", {"eos_token": "<a>"}, {"eos_token": "<b>"}))
    assert legacy.eos_token == "<b>" and legacy.eos_id == 260          # the map overrides a legacy config
    modern = {"eos_token": "<a>", "added_tokens_decoder": {}}
    tok = HFTokenizer.from_folder(tiny_folder(tmp_path / "b", modern, {"eos_token": "<b>", "bos_token": "<c>"}))
    assert (tok.eos_token, tok.bos_token, tok.eos_id, tok.bos_id) == ("<a>", "<c>", 260, 261)


def at(path, message):          # a pattern matching exactly "<path>: <message>" (message is a regex)
    return rf"^{re.escape(str(path))}: {message}$"


def test_folder_errors(tmp_path):
    with pytest.raises(ValueError, match=at(tmp_path / "nope", "not a folder")):
        HFTokenizer.from_folder(tmp_path / "nope")
    with pytest.raises(ValueError, match=at(tmp_path, r"no tokenizer.json \(Petit reads a Hugging Face tokenizer from "
                                                      r"its tokenizer.json\)")):
        HFTokenizer.from_folder(tmp_path)
    folder = tiny_folder(tmp_path / "f")
    config = folder / "tokenizer_config.json"
    config.write_text('{\n  "eos_token": "<a>"\n  "bos_token": "<b>"\n}')
    with pytest.raises(ValueError, match=at(config, "invalid JSON at line 3, column 3: Expecting ',' delimiter")):
        HFTokenizer.from_folder(folder)
    config.write_text("[1]")
    with pytest.raises(ValueError, match=at(config, "expected a JSON object, got list")):
        HFTokenizer.from_folder(folder)
    config.write_text('{"added_tokens_decoder": {"300": {"content": "<x>"}}}')
    with pytest.raises(ValueError, match=at(config, "added_tokens_decoder gives '<x>' the id 300 but the tokenizer "
                                                    "has it as 260")):
        HFTokenizer.from_folder(folder)
    config.unlink()
    (folder / "tokenizer.json").write_text('{"version": "1.0",\n "model": {')
    with pytest.raises(ValueError, match=at(folder / "tokenizer.json", "invalid JSON at line 2, column 12: .*")):
        HFTokenizer.from_folder(folder)
    (folder / "tokenizer.json").write_bytes(b'{"\xff"}')
    with pytest.raises(ValueError, match=at(folder / "tokenizer.json", r"not valid UTF-8 \(byte offset 2\)")):
        HFTokenizer.from_folder(folder)


# ---------------------------------------------------------------- read_folder_metadata

def write_files(folder, files):
    folder.mkdir(exist_ok=True)
    for name, value in files.items():
        (folder / name).write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
    return folder


def test_metadata_of_the_fixture_folders(folders):
    meta = read_folder_metadata(folders["phi3"])
    assert meta["chat_template"] == (FIXTURES / "phi3" / "chat_template.jinja").read_text(encoding="utf-8")
    assert meta["special_tokens"] == {"bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                                      "unk_token": "<unk>"}
    assert meta["eos_token_ids"] == [] and "generation" not in meta
    assert read_folder_metadata(folders["qwen2"])["special_tokens"] == {"eos_token": "<|im_end|>",
                                                                        "pad_token": "<|endoftext|>"}


def test_metadata_of_a_full_folder(tmp_path):
    folder = write_files(tmp_path, {
        "tokenizer_config.json": {"bos_token": {"content": "<|begin|>"}, "eos_token": "<|eot|>",
                                  "chat_template": [{"name": "tool_use", "template": "T"},
                                                    {"name": "default", "template": "{{ bos_token }}D"}]},
        "generation_config.json": {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0,
                                   "repetition_penalty": 1.05, "max_new_tokens": 100, "bos_token_id": 1,
                                   "eos_token_id": [128001, 128009]},
        "config.json": {"eos_token_id": 128001, "text_config": {"eos_token_id": 128008}},
    })
    meta = read_folder_metadata(folder)
    assert meta == {"chat_template": "{{ bos_token }}D",
                    "special_tokens": {"bos_token": "<|begin|>", "eos_token": "<|eot|>"},
                    "generation": {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0.0,
                                   "repetition_penalty": 1.05},
                    "eos_token_ids": [128001, 128009, 128008]}
    settings = resolve({"top_k": 5}, meta["generation"])
    assert (settings["temperature"], settings["top_k"], settings["top_p"]) == (0.6, 5, 0.9)
    Sampler(**settings)
    write_files(folder, {"generation_config.json": {"do_sample": False, "temperature": 0.7, "eos_token_id": 2}})
    meta = read_folder_metadata(folder)
    assert resolve({}, meta["generation"])["temperature"] == 0.0 and meta["eos_token_ids"] == [2, 128001, 128008]


def test_chat_template_sources_in_order(tmp_path):
    folder = write_files(tmp_path, {"chat_template.json": {"chat_template": "J"}})
    assert read_folder_metadata(folder)["chat_template"] == "J"
    write_files(folder, {"tokenizer_config.json": {"chat_template": "C"}})
    assert read_folder_metadata(folder)["chat_template"] == "C"
    write_files(folder, {"chat_template.jinja": "F"})
    assert read_folder_metadata(folder)["chat_template"] == "F"


def test_metadata_of_an_empty_folder_and_errors(tmp_path):
    assert read_folder_metadata(tmp_path) == {"special_tokens": {}, "eos_token_ids": []}
    with pytest.raises(ValueError, match=at(tmp_path / "x", "not a folder")):
        read_folder_metadata(tmp_path / "x")
    for files, message in [
        ({"generation_config.json": '{"temperature": 0.7,}'}, "generation_config.json: invalid JSON at line 1, "
                                                              "column 21: Expecting property name enclosed in "
                                                              "double quotes"),
        ({"generation_config.json": {"top_p": 1.5}}, "generation_config.json: top_p must be a number in (0, 1], "
                                                     "got 1.5"),
        ({"generation_config.json": {"eos_token_id": "2"}}, "generation_config.json: eos_token_id must be a token "
                                                            "id or a list of token ids (integers >= 0), got '2'"),
        ({"tokenizer_config.json": {"chat_template": [{"name": "rag", "template": "R"}]}},
         "tokenizer_config.json: chat_template lists the templates 'rag' but none is named 'default'"),
        ({"tokenizer_config.json": {"eos_token": 5}}, "tokenizer_config.json: eos_token: expected a token string or "
                                                      "an object with a \"content\" string, got 5"),
    ]:
        folder = write_files(tmp_path / str(len(message)), files)
        with pytest.raises(ValueError) as error:
            read_folder_metadata(folder)
        assert str(error.value) == f"{folder / next(iter(files))}: {message.split(': ', 1)[1]}"


# ---------------------------------------------------------------- one protocol, and our BPE is GPT-2's

def gpt2_as_our_tokenizer():
    """The real GPT-2 vocab and merges as Petit's own byte-level BPE."""
    model = json.loads(gzip.decompress((FIXTURES / "gpt2" / "tokenizer.json.gz").read_bytes()))["model"]
    vocab = sorted(model["vocab"], key=model["vocab"].get)
    assert [model["vocab"][t] for t in vocab] == list(range(len(vocab)))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return Tokenizer(vocab, merges, ["<|endoftext|>"], eos_token="<|endoftext|>")


def test_our_bpe_with_gpt2s_vocab_gives_hugging_faces_ids():
    tok = gpt2_as_our_tokenizer()
    for text, ids in vectors("gpt2"):
        assert tok.encode(text) == ids, text
    for key, text, baseline in multilingual("gpt2"):
        assert tok.encode(text) == baseline["input_ids"], key      # GPT-2 adds no BOS or EOS


def test_both_tokenizer_kinds_follow_the_protocol(toks):
    own_bpe, own_char = gpt2_as_our_tokenizer(), Tokenizer(["h", "i", "<|e|>"], special_tokens=["<|e|>"])
    for tok in (toks["gpt2"], toks["phi3"], own_bpe, own_char):
        assert isinstance(tok, TokenizerProtocol)
        ids = tok.encode("hi", allow_special=True, add_bos=False)
        stream = tok.stream_decoder(skip_special=True)
        assert "".join(map(stream.push, ids)) + stream.flush() == tok.decode(ids, skip_special=False) == "hi"
        assert tok.type in ("bpe", "char", "hf") and tok.to_dict()["type"] == tok.type
        assert 0 < max(ids) < tok.vocab_size and tok.adds_bos in (False, True)
        assert all(tok.token_to_id(t) in tok.special_ids for t in tok.special_tokens)
    assert not isinstance(object(), TokenizerProtocol)
