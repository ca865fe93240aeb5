"""Issue 33, item 4: `petit export BASE --merge ADAPTER -o OUT` writes the base with a LoRA adapter merged in, as a
.petit or a GGUF file, in the base's own types or any type convert takes; the file runs the logits the merged model
in memory (petit.loading.lora.merge, the run-time adapter's reference) gives."""
import os

import numpy as np
import pytest

import petit
from petit.cli.commands import main
from petit.formats.petit_file import PetitFile
from petit.loading.lora import merge
from trainer.lora.train import FinetuneConfig, finetune

HERE = os.path.dirname(os.path.abspath(__file__))
QWEN2 = os.path.join(HERE, "fixtures", "hf", "qwen2")
QWEN2_Q8 = os.path.join(HERE, "fixtures", "gguf", "qwen2", "q8_0.gguf")
FACTS = os.path.join(HERE, "fixtures", "lora5", "facts.jsonl")
TEXT = "What colour is the moon of Zarb? The moon of Zarb is teal, said Marda Voss of Quellin."


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    out = tmp_path_factory.mktemp("lora") / "qwen2.lora"
    model = petit.load(QWEN2, weights="f32")
    finetune(model, FACTS, str(out), FinetuneConfig(rank=4, alpha=8.0, epochs=2, lr=3e-3, ctx=64, warmup=2),
             out=open(os.devnull, "w"))
    return str(out)


def _reference(base, adapter, scale, **kw):
    m = petit.load(base, **kw)
    ids = np.array(m.tokenizer.encode(TEXT))
    before = m.logits(ids)
    merge(m, adapter, scale)
    return ids, before, m.logits(ids)


def _err(got, want):
    return float(np.abs(got - want).max()) / float(np.ptp(want))


def test_merged_f32_file_runs_the_merged_models_logits(tmp_path, adapter, capsys):
    ids, before, want = _reference(QWEN2, adapter, 1.5, weights="f32")
    out = tmp_path / "merged.petit"
    assert main(["export", QWEN2, "--merge", adapter, "-o", str(out), "--f32", "--lora-scale", "1.5"]) == 0
    assert f"{adapter} merged into {QWEN2} at scale 1.5" in capsys.readouterr().out
    got = petit.load(str(out)).logits(ids)
    assert _err(got, want) <= 1e-6
    assert _err(before, want) > 1e-3                    # the adapter changes the model
    with PetitFile(str(out)) as f:
        assert f.metadata["merged_lora"] == {"adapter": "qwen2.lora", "scale": 1.5, "alpha": 8.0, "rank": 4}
        assert f.metadata["converted_from"] == "qwen2"
    assert sorted(os.listdir(tmp_path)) == ["merged.petit"]          # no temporary file left


@pytest.mark.parametrize("flag, dtype, bound", [("--q8", "q8_0", 0.02), ("--q4_0", "q4_0", 0.25)])
def test_merged_file_in_a_quantized_type(tmp_path, adapter, flag, dtype, bound):
    ids, before, want = _reference(QWEN2, adapter, 1.0, weights="f32")
    out = tmp_path / "merged.petit"
    assert main(["export", QWEN2, "--merge", adapter, "-o", str(out), flag]) == 0
    m = petit.load(str(out), repack=False)
    assert {W.dtype for W in m.net.matrices()} == {dtype}
    got = m.logits(ids)
    assert _err(got, want) <= bound                     # measured 0.018 (q8_0), 0.195 (q4_0)
    assert _err(got, before) > 0.15                     # and not the base without the adapter (0.27 from it)


def test_a_gguf_base_keeps_its_types_and_merges_into_a_gguf_file(tmp_path, adapter):
    # the q8_0 base with the adapter, merged in memory, against the file: the adapted matrices quantized again to
    # q8_0 as merge() quantizes them, the rest copied as stored, so the same bits
    ids, _, want = _reference(QWEN2_Q8, adapter, 1.0, repack=False)
    out = tmp_path / "merged.gguf"
    assert main(["export", QWEN2_Q8, "--merge", adapter, "-o", str(out)]) == 0
    m = petit.load(str(out), repack=False)
    assert {W.dtype for W in m.net.matrices()} == {"q8_0"}
    assert _err(m.logits(ids), want) <= 1e-6
    base = petit.load(QWEN2_Q8, repack=False)
    np.testing.assert_array_equal(m.net.embed.raw, base.net.embed.raw)     # not adapted: copied


def test_merge_errors_name_the_problem(tmp_path, adapter, capsys):
    llama = os.path.join(HERE, "fixtures", "hf", "llama")
    out = str(tmp_path / "x.petit")
    cases = [
        (["export", llama, "--merge", adapter, "-o", out], "an adapter for a 'qwen2' model, this model is 'llama'"),
        (["export", QWEN2, "--merge", str(tmp_path / "none.lora"), "-o", out], "none.lora: file not found"),
        (["export", QWEN2, "--merge", adapter, "-o", out, "--lora-scale", "abc"],
         "the adapter scale must be a finite number, got 'abc'"),
        (["export", str(tmp_path / "nobase"), "--merge", adapter, "-o", out], "nobase: no such file or folder"),
        (["export", str(tmp_path), "-o", out, "--q4_k_m"], "--q4_k_m applies to --merge only"),
        (["export", str(tmp_path), "-o", out, "--lora-scale", "2"], "--lora-scale applies to --merge only"),
    ]
    for argv, said in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("petit export: error: ") and said in err, (argv, err)
    assert os.listdir(tmp_path) == []
