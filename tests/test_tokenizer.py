"""Tests for petit.tokenizer: byte-level BPE, char mode, files, serialization and streaming."""

import json
import random

import pytest

from petit.tokenizer import Tokenizer, bytes_to_unicode

B2U = bytes_to_unicode()
BYTE_TOKENS = [B2U[b] for b in range(256)]  # id == byte value
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|im"]
# rank order matters: "he" (rank 1) beats "th" (rank 3) in "the".
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("t", "h"), ("Ġ", "a"), ("l", "l"), ("ll", "o")]
EXTRA = ["Ġt", "he", "Ġthe", "th", "Ġa", "ll", "llo"]

HARD_STRINGS = [
    "", "a", " ", "\n\n", "a ,b", "3 3", "héllo wörld", "日本語", "👍🏽", "e\u0301",
    '{"key": [1, 2.5, null], "s": "x\\ny"}', "\x00\x01\x1b[0m\x7f\t\r\n", "  leading", "trailing  ",
    "it's I'LL we've", "a\u00a0b\u2003c", "snake_case __init__ 1_000", "tab\tsep\tline\n", "½ ² Ⅻ",
    "<|im_start|>user\nhi<|im_end|>", "<|im <|im_end <|im_end|",
]


def bpe_tokenizer(**kwargs):
    vocab = BYTE_TOKENS + EXTRA + SPECIALS
    return Tokenizer(vocab, MERGES, special_tokens=SPECIALS, **kwargs)


def ids_of(tok, *tokens):
    return [tok.token_to_id(t) for t in tokens]


def naive_bpe(symbols, merges):
    """Reference: merge the lowest-ranked adjacent pair, the leftmost one first, one merge at a time (Hugging Face's
    BPE). For merges in the order they were learned (each after the merges that make its parts), as a trainer writes
    them, this equals GPT-2's and minbpe's rule (merge all occurrences of the lowest-ranked pair, then look again)."""
    ranks = {m: r for r, m in enumerate(merges)}
    while True:
        found = [(ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in ranks]
        if not found:
            return symbols
        _, i = min(found)
        symbols = symbols[:i] + [symbols[i] + symbols[i + 1]] + symbols[i + 2:]


# ---------------------------------------------------------------- byte alphabet and pre-tokenizer

def test_bytes_to_unicode_is_gpt2_table():
    assert len(B2U) == 256 and len(set(B2U.values())) == 256
    assert B2U[ord("a")] == "a" and B2U[ord("!")] == "!" and B2U[0xA1] == "¡" and B2U[0xFF] == "ÿ"
    assert B2U[0] == "\u0100" and B2U[ord(" ")] == "Ġ" and B2U[ord("\n")] == "Ċ" and B2U[0xAD] == "\u0143"


def test_bpe_merges_stay_inside_gpt2_pre_tokenizer_chunks():
    """The BPE runs on GPT-2's own pre-tokenizer regex (Hugging Face `ByteLevel`): a merge never crosses a chunk.
    "²" is a number there (\\p{N}), not a letter as the stdlib-regex approximation used before issue 13 had it, so
    "a²" is two chunks and the "a"+"²" merges do not apply (the old encoder gave the one token "aÂ²")."""
    merges = [("o", "Ġ"), ("a", "Â"), ("aÂ", "²"), ("'", "s")]
    tok = Tokenizer(BYTE_TOKENS + ["oĠ", "aÂ", "aÂ²", "'s"], merges)
    assert tok.encode("Hello world's") == [*b"Hello world", tok.token_to_id("'s")]
    assert tok.encode("a²") == [ord("a"), 0xC2, 0xB2]
    assert tok.encode("a\x1cb") == [ord("a"), 0x1C, ord("b")]


# ---------------------------------------------------------------- BPE encoding

def test_bpe_exact_ids_and_rank_order():
    tok = bpe_tokenizer()
    # "the": "he" (rank 1) is merged before "th" (rank 3) could be; " the" -> "Ġt"+"he" -> "Ġthe".
    assert tok.encode("the the a") == ids_of(tok, "t", "he", "Ġthe", "Ġa")
    assert tok.encode("hello") == ids_of(tok, "he", "llo")
    assert tok.encode("a ,b") == [ord("a"), ord(" "), ord(","), ord("b")]
    assert tok.encode("é") == [0xC3, 0xA9]


def test_bpe_matches_naive_reference_with_random_merges():
    rng = random.Random(1)
    letters = "abc"
    vocab, merges = BYTE_TOKENS[:], []
    pool = list(letters)
    while len(merges) < 30:  # random merges, inserted at random ranks (not ordered by construction)
        left, right = rng.choice(pool), rng.choice(pool)
        if left + right not in vocab and len(left + right) < 7:
            vocab.append(left + right)
            pool.append(left + right)
            merges.insert(rng.randrange(len(merges) + 1), (left, right))
    tok = Tokenizer(vocab, merges)
    for _ in range(300):
        word = "".join(rng.choice(letters) for _ in range(rng.randrange(1, 25)))
        expected = naive_bpe(list(word), merges)
        assert [tok.vocab[i] for i in tok.encode(word)] == expected, word


@pytest.mark.parametrize("text", HARD_STRINGS)
def test_bpe_round_trip(text):
    tok = bpe_tokenizer()
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode(text, allow_special=False)) == text


def test_special_tokens_allowed_and_disallowed():
    tok = bpe_tokenizer()
    start, end, prefix = ids_of(tok, *SPECIALS)
    assert tok.special_ids == {start, end, prefix}
    assert tok.encode("<|im_start|>hi<|im_end|>") == [start, ord("h"), ord("i"), end]
    assert tok.encode("<|im x") == [prefix] + tok.encode(" x")  # longest match first, else shorter
    plain = tok.encode("<|im_end|>", allow_special=False)
    assert plain == [ord(c) for c in "<|im_end|>"] and not set(plain) & tok.special_ids
    assert tok.decode(plain) == "<|im_end|>"


def test_decode_special_and_skip_special():
    tok = bpe_tokenizer()
    ids = tok.encode("<|im_start|>hi<|im_end|>")
    assert tok.decode(ids) == "<|im_start|>hi<|im_end|>"
    assert tok.decode(ids, skip_special=True) == "hi"
    assert tok.decode_bytes(ids, skip_special=True) == b"hi"
    assert tok.token_bytes(tok.token_to_id("Ġthe")) == b" the"


def test_decode_invalid_utf8_is_replaced_and_bad_ids_raise():
    tok = bpe_tokenizer()
    assert tok.decode([0xE6, 0x97]) == "\ufffd"
    assert tok.decode([0xFF, ord("a")]) == "\ufffda"
    with pytest.raises(ValueError, match=r"token id 9999 is out of range for a vocab of 266 tokens"):
        tok.decode([1, 9999])
    with pytest.raises(ValueError, match=r"token id -1 is out of range"):
        tok.decode([-1])
    with pytest.raises(ValueError, match=r"token id must be an int, got 'a'"):
        tok.token_bytes("a")


def test_bos_handling():
    vocab = BYTE_TOKENS + ["<s>", "</s>"]
    tok = Tokenizer(vocab, [], ["<s>", "</s>"], bos_token="<s>", eos_token="</s>", add_bos=True, type="bpe")
    assert tok.type == "bpe" and tok.bos_id == 256 and tok.eos_id == 257
    assert tok.encode("a") == [256, 97]
    assert tok.encode("a", add_bos=False) == [97]
    with pytest.raises(ValueError, match="no bos_token"):
        bpe_tokenizer().encode("a", add_bos=True)


def test_small_vocab_missing_bytes_unk_and_error():
    vocab = ["a", "b", "Ġ", "ab", "<unk>"]
    tok = Tokenizer(vocab, [("a", "b")], ["<unk>"], unk_token="<unk>")
    assert tok.encode("ab é日 b") == [3, 2, 4, 4, 2, 1]  # one unk per unknown character
    strict = Tokenizer(vocab, [("a", "b")], ["<unk>"])
    with pytest.raises(ValueError, match=r"character 'é' \(U\+00E9\) at index 3.*unk_token is not set"):
        strict.encode("ab é")


def test_lone_surrogate_raises():
    with pytest.raises(ValueError, match=r"U\+D800\) at index 1"):
        bpe_tokenizer().encode("a\ud800")


# ---------------------------------------------------------------- char mode

def char_tokenizer(**kwargs):
    vocab = ["a", "b", "Ġ", "Ã©", "<unk>", "<|eot|>"] + [B2U[b] for b in "日".encode()]
    return Tokenizer(vocab, special_tokens=["<unk>", "<|eot|>"], **kwargs)


def test_char_mode_lookup_byte_fallback_and_unk():
    tok = char_tokenizer(unk_token="<unk>")
    assert tok.type == "char"
    assert tok.encode("ab é") == [0, 1, 2, 3]
    assert tok.encode("日") == [6, 7, 8]  # no char token: its byte tokens
    assert tok.encode("a本b<|eot|>") == [0, 4, 1, 5]
    assert tok.decode(tok.encode("ab é日")) == "ab é日"


def test_char_mode_error_names_character_and_index():
    with pytest.raises(ValueError, match=r"character '本' \(U\+672C\) at index 2"):
        char_tokenizer().encode("ab本")


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, message", [
    (dict(vocab=[]), "empty vocab"),
    (dict(vocab=["a", "b", "a"]), r"duplicate tokens: 'a' \(ids 0 and 2\)"),
    (dict(vocab=["a", ""]), r"vocab\[1\] must be a non-empty string"),
    (dict(vocab=["a", "b"], merges=[("a", "b")]), r"merges\[0\] \('a', 'b'\) needs 'ab'"),
    (dict(vocab=["a", "ab"], merges=[("a", "b")]), r"needs 'b'"),
    (dict(vocab=["a", "b", "ab"], merges=[("a", "b"), ("a", "b")]), "duplicate"),
    (dict(vocab=["a"], merges=[("a",)]), r"merges\[0\] must be a pair"),
    (dict(vocab=["a"], special_tokens=["<|x|>"]), r"special tokens not in the vocab: '<\|x\|>'"),
    (dict(vocab=["a"], eos_token="</s>"), r"eos_token '</s>' is not in the vocab"),
    (dict(vocab=["a"], unk_token="?"), r"unk_token '\?' is not in the vocab"),
    (dict(vocab=["a"], add_bos=True), "needs a bos_token"),
    (dict(vocab=["a"], type="wordpiece"), "type must be 'bpe' or 'char'"),
    (dict(vocab=["a", "b", "ab"], merges=[("a", "b")], type="char"), "takes no merges"),
])
def test_constructor_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Tokenizer(**kwargs)


# ---------------------------------------------------------------- serialization and files

def test_to_dict_from_dict_round_trip():
    tok = bpe_tokenizer(eos_token="<|im_end|>")
    d = json.loads(json.dumps(tok.to_dict()))
    assert list(d) == ["type", "vocab", "merges", "special_tokens", "bos_token", "eos_token", "unk_token",
                       "add_bos"]
    assert d["merges"][0] == ["Ġ", "t"] and d["type"] == "bpe" and d["eos_token"] == "<|im_end|>"
    again = Tokenizer.from_dict(d)
    assert again.to_dict() == tok.to_dict()
    assert again.encode(HARD_STRINGS[-2]) == tok.encode(HARD_STRINGS[-2])
    assert Tokenizer.from_dict(char_tokenizer().to_dict()).to_dict()["merges"] == []


def test_from_dict_defaults_and_errors():
    tok = Tokenizer.from_dict({"type": "bpe", "vocab": ["a", "b", "ab"], "merges": [["a", "b"]]})
    assert tok.special_tokens == [] and tok.unk_token is None and tok.add_bos is False
    with pytest.raises(ValueError, match="unknown keys: 'vocabulary'"):
        Tokenizer.from_dict({"vocabulary": ["a"]})
    with pytest.raises(ValueError, match="needs 'vocab'"):
        Tokenizer.from_dict({"type": "char"})


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_from_files(tmp_path):
    vocab = BYTE_TOKENS + EXTRA + ["<|im_start|>", "<|im_end|>", "<s>", "<notspecial>"]
    vocab_file = write(tmp_path / "vocab.txt", vocab)
    merges_file = write(tmp_path / "merges.txt", ["#version: 0.2", ""] + [f"{a} {b}" for a, b in MERGES])
    tok = Tokenizer.from_files(vocab_file, merges_file, eos_token="<|im_end|>")
    assert tok.type == "bpe" and tok.vocab == vocab and tok.merges == MERGES
    assert tok.special_tokens == ["<|im_start|>", "<|im_end|>", "<s>"]
    assert tok.encode("the<|im_end|>") == ids_of(tok, "t", "he", "<|im_end|>")
    explicit = Tokenizer.from_files(vocab_file, merges_file, special_tokens=["<notspecial>"])
    assert explicit.special_tokens == ["<notspecial>"]
    char = Tokenizer.from_files(vocab_file)
    assert char.type == "char" and char.encode(" the") == [ord(" "), ord("t"), ord("h"), ord("e")]


def test_from_files_keeps_line_content(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes("a\r\n b\nc".encode())  # no stripping besides the "\n"
    assert Tokenizer.from_files(path).vocab == ["a\r", " b", "c"]


def test_from_files_errors(tmp_path):
    vocab_file = write(tmp_path / "vocab.txt", ["a", "b", "ab"])
    bad = write(tmp_path / "merges.txt", ["#version: 0.2", "a b", "ab"])
    with pytest.raises(ValueError, match=r"merges file .*merges.txt line 3: expected 'left right'.*'ab'"):
        Tokenizer.from_files(vocab_file, bad)
    missing_part = write(tmp_path / "merges2.txt", ["a b", "b a"])
    with pytest.raises(ValueError, match=r"merges2.txt line 2: 'ba' not in the vocab"):
        Tokenizer.from_files(vocab_file, missing_part)
    with pytest.raises(ValueError, match=r"vocab file .*nope.txt does not exist"):
        Tokenizer.from_files(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match=r"merges file .*nope.txt does not exist"):
        Tokenizer.from_files(vocab_file, tmp_path / "nope.txt")
    dup = write(tmp_path / "dup.txt", ["a", "b", "a"])
    with pytest.raises(ValueError, match=r"dup.txt line 3: token 'a' repeats line 1"):
        Tokenizer.from_files(dup)
    empty_line = write(tmp_path / "empty.txt", ["a", "", "b"])
    with pytest.raises(ValueError, match=r"empty.txt line 2: empty token"):
        Tokenizer.from_files(empty_line)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"a\n\xe9\n")
    with pytest.raises(ValueError, match="not valid UTF-8"):
        Tokenizer.from_files(latin1)


# ---------------------------------------------------------------- streaming

def byte_tokenizer():
    return Tokenizer(BYTE_TOKENS + ["<|im_end|>"], special_tokens=["<|im_end|>"], type="bpe")


def test_stream_never_emits_partial_characters():
    tok = byte_tokenizer()
    text = "日本👍"
    ids = tok.encode(text)
    assert len(ids) == len(text.encode())  # one token per byte
    stream, pieces = tok.stream_decoder(), []
    for t in ids:
        piece = stream.push(t)
        assert "\ufffd" not in piece
        pieces.append(piece)
    assert pieces == ["", "", "日", "", "", "本", "", "", "", "👍"]
    assert stream.flush() == ""
    assert "".join(pieces) == tok.decode(ids) == text


def test_stream_matches_decode_on_random_bytes_and_specials():
    tok = byte_tokenizer()
    rng = random.Random(2)
    pool = list(range(257)) + list("日é👍".encode()) * 8
    for _ in range(300):
        ids = [rng.choice(pool) for _ in range(rng.randrange(12))]
        for skip in (False, True):
            stream = tok.stream_decoder(skip)
            out = "".join(stream.push(t) for t in ids) + stream.flush()
            assert out == tok.decode(ids, skip_special=skip), ids


def test_stream_flush_dangling_partial_and_bpe_tokens():
    tok = byte_tokenizer()
    stream = tok.stream_decoder()
    assert stream.push(0xE6) == "" and stream.push(0x97) == ""
    assert stream.flush() == "\ufffd"
    assert stream.push(ord("a")) == "a"  # usable again after flush
    bpe = bpe_tokenizer()
    stream = bpe.stream_decoder()
    ids = bpe.encode("the héllo 日本 <|im_end|>")
    assert "".join(stream.push(t) for t in ids) + stream.flush() == "the héllo 日本 <|im_end|>"
    with pytest.raises(ValueError, match="out of range"):
        stream.push(10_000)
