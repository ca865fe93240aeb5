"""The bundled models' tokenizer gives the ids it gave when the models were trained.

`tests/fixtures/default_tokenizer/ids.json.gz` holds 1,155 texts (the trainer's chat corpus, its held-out questions,
the GPT-2 and Qwen2 test vectors and multilingual inputs under tests/fixtures/tokenizers, emoji, CJK, whitespace runs,
special tokens inside text, seeded random text) with the ids of the hand-rolled encoder the bundled models were trained
on (see its make_ids.py). Encoding now runs on Hugging Face `tokenizers` and must give the same ids.
"""
import gzip
import json
import os

import pytest

import petit

HERE = os.path.dirname(__file__)
ASSETS = os.path.join(HERE, "..", "assets")


def _cases():
    with gzip.open(os.path.join(HERE, "fixtures", "default_tokenizer", "ids.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)["cases"]


@pytest.mark.parametrize("name", ["default-q8_0.petit", "default-q4_0.petit"])
def test_bundled_tokenizer_ids_are_unchanged(name):
    tok = petit.load(os.path.join(ASSETS, name)).tokenizer
    cases = _cases()
    assert len(cases) == 1155
    for case in cases:
        assert tok.encode(case["text"]) == case["ids"], case["text"]
        assert tok.encode(case["text"], allow_special=False) == case["plain"], case["text"]
        assert tok.decode(case["ids"]) == case["text"]
