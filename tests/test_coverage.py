"""The coverage tables at the end of docs/hf-models.md and docs/gguf.md (scripts/coverage.py, from the snapshot of
transformers' and llama.cpp's registries in tests/fixtures/registry): the docs say what the engine's registries say,
and a model that is not a decoder is refused saying what it is."""
import importlib.util
import json
import os

import pytest

import petit
from petit.models import MODEL_TYPES
from petit.models.refusals import GGUF_NOT_DECODERS, NOT_DECODERS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("coverage_tables", os.path.join(ROOT, "scripts", "coverage.py"))
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)


@pytest.mark.parametrize("which", ["hf", "gguf"])
def test_the_docs_tables_are_what_the_registries_say(which):
    with open(coverage.DOCS[which], encoding="utf-8") as f:
        text = f.read()
    made = coverage.hf_table() if which == "hf" else coverage.gguf_table()
    assert coverage.replaced(text, made, which) == text, "run `python scripts/coverage.py --write`"


def test_every_family_petit_runs_is_in_the_registry_snapshot_or_its_own():
    types = coverage.registry()["transformers"]["types"]
    # families transformers has no native class for: llama.cpp (or the Hub's remote code) is their reference
    remote_code = {"internlm3", "minicpm", "internlm2", "rwkv6", "rwkv7", "rwkv6qwen2"}     # rwkv6qwen2: GGUF only
    # multimodal wrappers transformers registers for image-text-to-text only (Mistral3ForConditionalGeneration)
    wrappers = {"mistral3"}
    # issue 36, the vlnew group: image-text-to-text wrappers and their text types (transformers' AutoModel only)
    wrappers |= {"paddleocr_vl", "paddleocr_vl_text", "glm_ocr", "glm_ocr_text", "hunyuan_vl", "hunyuan_vl_text",
                 "granite4_vision", "granite4_vision_text", "granite_docling", "granite_docling_text",
                 "ernie4_5_vl_moe", "ernie4_5_vl_moe_text", "cosmos3_edge", "cosmos3_edge_text",
                 "molmo2", "molmo2_text", "deepseek_ocr2", "deepseek_ocr2_text",
                 "hy_v4_vl", "hy_v4_vl_text", "kosmos_2_text_model", "kosmos-2"}
    assert set(MODEL_TYPES) - set(types) <= remote_code | wrappers
    assert not set(NOT_DECODERS) - set(types) and not set(NOT_DECODERS) & set(MODEL_TYPES)
    assert not set(GGUF_NOT_DECODERS) - set(coverage.registry()["llama_cpp"]["archs"])


@pytest.mark.parametrize("model_type,what", [("bart", "an encoder-decoder"), ("electra", "a bidirectional encoder"),
                                             ("whisper", "a speech recognizer")])
def test_a_folder_of_a_model_that_is_not_a_decoder_is_refused_saying_what_it_is(tmp_path, model_type, what):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "vocab_size": 10}))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match=f"unsupported model_type '{model_type}': {what}.*; Petit runs decoder-only "
                                         f"language models"):
        petit.load(tmp_path)
