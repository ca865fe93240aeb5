"""Tokenizer training (trainer/bpe.py, on Hugging Face's BpeTrainer), checked against a naive reference and the
dict contract of petit.tokenizer."""

import os
import random
import re
from collections import Counter

import pytest

from petit.tokenizer import Tokenizer, bytes_to_unicode
from trainer.bpe import split_special, train_tokenizer

SPECIALS = ["<|im_start|>", "<|im_end|>"]
ROOT = os.path.join(os.path.dirname(__file__), "..")
KEYS = {"type", "vocab", "merges", "special_tokens", "bos_token", "eos_token", "unk_token", "add_bos"}


def _gpt2_chunks(text):
    """GPT-2's pre-tokenizer for the ASCII text the reference is given: contractions, an optional space plus letters,
    digits or other symbols, whitespace runs whose last space joins the next word."""
    assert text.isascii()
    return re.findall(r"'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+", text)


def _naive_bpe(text, vocab_size, specials):
    """Reference: recount every pair after every merge; most frequent, ties to the smaller pair in Hugging Face's
    numbering (the byte symbols in code-point order of their characters, then the learned tokens in order)."""
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    order = {c: i for i, c in enumerate(sorted(tokens))}
    words = Counter()
    pieces = re.split("|".join(map(re.escape, specials)), text) if specials else [text]
    for piece in pieces:
        for chunk in _gpt2_chunks(piece):
            words[tuple(chunk.encode("utf-8"))] += 1
    merges = []
    while len(tokens) < vocab_size - len(specials):
        counts = Counter()
        for word, c in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] += c
        if not counts:
            break
        a, b = min(counts, key=lambda p: (-counts[p], order[tokens[p[0]]], order[tokens[p[1]]]))
        merged = tokens[a] + tokens[b]
        if merged not in tokens:
            tokens.append(merged)
            order[merged] = len(order)
        new_id = tokens.index(merged)
        merges.append([tokens[a], tokens[b]])
        new_words = Counter()
        for word, c in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == (a, b):
                    out.append(new_id)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] += c
        words = new_words
    return tokens + list(specials), merges


def test_merges_follow_frequency_then_smaller_ids():
    text = "abcd\n" * 5 + "abef\n" * 3 + "ghij\n" * 2
    d = train_tokenizer(text, vocab_size=264)
    assert d["merges"] == [["a", "b"], ["c", "d"], ["ab", "cd"], ["e", "f"], ["ab", "ef"], ["g", "h"], ["i", "j"],
                           ["gh", "ij"]]
    assert d["vocab"][256:] == ["ab", "cd", "abcd", "ef", "abef", "gh", "ij", "ghij"]
    assert train_tokenizer(text, vocab_size=260)["merges"] == d["merges"][:4]


def test_dict_contract_and_byte_alphabet():
    d = train_tokenizer("héllo wörld " * 20, vocab_size=300, special_tokens=SPECIALS, eos_token="<|im_end|>")
    assert set(d) == KEYS
    assert d["type"] == "bpe" and d["bos_token"] is None and d["unk_token"] is None and d["add_bos"] is False
    assert d["eos_token"] == "<|im_end|>" and d["special_tokens"] == SPECIALS
    b2u = bytes_to_unicode()
    assert d["vocab"][:256] == [b2u[b] for b in range(256)]
    assert d["vocab"][-2:] == SPECIALS
    # " wörld" and "héllo" (ö, é = bytes C3 B6, C3 A9) spelled in GPT-2's byte alphabet, each merged whole
    assert "ĠwÃ¶rld" in d["vocab"] and "hÃ©llo" in d["vocab"]
    tok = Tokenizer.from_dict(d)
    assert tok.vocab_size == len(d["vocab"]) and tok.eos_id == tok.vocab_size - 1


def test_special_tokens_kept_whole_and_never_merged():
    text = "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n" * 50
    d = train_tokenizer(text, vocab_size=300, special_tokens=SPECIALS, eos_token="<|im_end|>")
    learned = d["vocab"][256:-2]
    assert "Ġthere" in learned and "assistant" in learned  # every chunk merged whole (corpus exhausted)
    assert not any("|" in t or "im_" in t for t in learned), "a special token leaked into the merges"
    assert not any("|" in part for merge in d["merges"] for part in merge)
    tok = Tokenizer.from_dict(d)
    ids = tok.encode(text)
    assert ids.count(tok.token_to_id("<|im_start|>")) == 100 and ids.count(tok.eos_id) == 100
    assert tok.decode(ids) == text


def test_vocab_size_respected_and_round_trip():
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "épsilon", "ζeta", "12", "345", "don't", "x_y", "!!", "😀"]
    text = " ".join(rng.choice(words) for _ in range(3000)) + "\n\n  tabs\tand  spaces \n"
    d = train_tokenizer(text, vocab_size=300, special_tokens=SPECIALS)
    assert len(d["vocab"]) == 300 and len(set(d["vocab"])) == 300
    tok = Tokenizer.from_dict(d)
    ids = tok.encode(text)
    assert max(ids) < 300 and tok.decode(ids) == text
    assert len(ids) < len(text.encode("utf-8")) / 2, "merges should compress the corpus"


def test_matches_naive_reference_trainer():
    rng = random.Random(1)
    text = " ".join("".join(rng.choice("abcde") for _ in range(rng.randint(1, 6))) for _ in range(2000))
    text += "<|im_end|>" + " ".join(rng.choice(["cab", "bead", "dace"]) for _ in range(300))
    d = train_tokenizer(text, vocab_size=330, special_tokens=["<|im_end|>"])
    vocab, merges = _naive_bpe(text, 330, ["<|im_end|>"])
    assert d["merges"] == merges and d["vocab"] == vocab


def test_small_corpus_stops_when_no_pairs_are_left():
    d = train_tokenizer("abab", vocab_size=1000)
    assert d["merges"] == [["a", "b"], ["ab", "ab"]] and len(d["vocab"]) == 258


def test_char_mode():
    text = "héllo<|im_end|>wörld"
    d = train_tokenizer(text, mode="char", vocab_size=None, special_tokens=["<|im_end|>"], eos_token="<|im_end|>")
    assert d["type"] == "char" and d["merges"] == []
    chars = sorted(set("héllowörld"))
    assert d["vocab"] == ["".join(bytes_to_unicode()[b] for b in c.encode()) for c in chars] + ["<|im_end|>"]
    tok = Tokenizer.from_dict(d)
    assert tok.decode(tok.encode(text)) == text and len(tok.encode(text)) == len("héllo") + 1 + len("wörld")


def test_split_special_prefers_the_longest():
    assert split_special("a<|x|>b<|xy|>c", ["<|x|>", "<|xy|>"]) == ["a", "b", "c"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(vocab_size=257, special_tokens=SPECIALS), r"at least 256 \+ 2 special tokens = 258.*got 257"),
    (dict(mode="wordpiece"), "mode must be 'bpe' or 'char', got 'wordpiece'"),
    (dict(special_tokens=["<|a|>"], eos_token="<|b|>"), "eos_token '<|b|>' must be one of the special tokens"),
    (dict(special_tokens="<|a|>"), "must be a list of strings"),
    (dict(special_tokens=["<|a|>", "<|a|>"]), "duplicates"),
    (dict(mode="char", vocab_size=3), "4 distinct characters .* more than vocab_size=3"),
    (dict(vocab_size=0), "vocab_size must be a positive integer or None, got 0"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        train_tokenizer("hello", **kwargs)


def test_char_mode_needs_characters():
    with pytest.raises(ValueError, match="no characters outside special tokens"):
        train_tokenizer("<|im_end|>", mode="char", vocab_size=None, special_tokens=["<|im_end|>"])


def test_default_recipe_learns_the_bundled_models_tokenizer():
    """Hugging Face's trainer, on the chat corpus of the bundled models' recipe, learns their very tokenizer (the one
    the hand-rolled learner wrote into assets/default-*.petit): retraining them keeps their ids."""
    import petit
    from trainer import chat_corpus
    from trainer.default_model import TRAIN_ARGS

    def arg(name):
        return int(TRAIN_ARGS[TRAIN_ARGS.index(name) + 1])

    text = chat_corpus.make_split(arg("--seed"), arg("--chat-examples")).train_text
    d = train_tokenizer(text, vocab_size=arg("--vocab-size"), special_tokens=chat_corpus.SPECIAL_TOKENS,
                        eos_token=chat_corpus.EOS_TOKEN)
    for name in ("default-q8_0.petit", "default-q4_0.petit"):
        assert d == petit.load(f"{ROOT}/assets/{name}").tokenizer.to_dict()


def test_lone_surrogate_in_the_corpus_is_named():
    with pytest.raises(ValueError, match=r"^the corpus holds a lone surrogate '\\ud800' \(U\+D800\), which has no "
                                         r"UTF-8 form$"):
        train_tokenizer("ab\ud800cd", vocab_size=300)
