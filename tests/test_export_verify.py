"""Train -> export (f32 / q8_0 / q4_0) -> verify, and the independent reference forward.

Tolerances:
- f32 export vs the trainer's own forward in float64: engine <= 1e-4 absolute (float32 rounding over two layers,
  measured ~1e-7 on logits of size ~1); the reference, which computes in float64 on the same float32 weights,
  <= 1e-9.
- q8_0 / q4_0 exports vs the trainer's float64 forward: the weight rounding of the format plus the engine's
  int8 activations; worst error <= 3% (q8_0) / 15% (q4_0) of the logit scale (max |logit|), measured 0.46% / 5.8%.
- the reference vs tests/oracles.py (both float64 NumPy, same weights): <= 1e-9; the engine vs the reference on
  f32 files: <= 1e-4.
"""
import argparse
import ast
import io
import json
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.formats.petit_file import read_petit, write_petit
from trainer.chat_corpus import make_split
from trainer.export import add_export_parser, export_checkpoint
from trainer.model import forward
from trainer.reference import Reference
from trainer.train import TrainConfig, train
from trainer.verify import add_verify_parser, limits, verify

import models
import oracles

PROMPT = "<|im_start|>user\nwhat is 3 + 4?<|im_end|>\n<|im_start|>assistant\n"
FLAGS = {"f32": "--f32", "q8_0": "--q8", "q4_0": "--q4"}


def _cli(argv) -> int:
    parser = argparse.ArgumentParser(prog="petit")
    sub = parser.add_subparsers()
    add_export_parser(sub)
    add_verify_parser(sub)
    args = parser.parse_args([str(a) for a in argv])
    return args.func(args)


def _train(out: Path, tied: bool = True, dim: int = 64, ffn: int = 128, seed: int = 3):
    """A few steps on the chat corpus with a fixed byte-level tokenizer (a trained BPE one could differ between
    runs), so the checkpoint is the same every time."""
    config = TrainConfig(n_layers=2, dim=dim, n_heads=4, n_kv_heads=2, ffn_dim=ffn, context=64, steps=4, batch_size=4,
                         eval_interval=4, checkpoint_interval=0, tie_embeddings=tied, seed=seed)
    return train(config, make_split(1, 150).train_text, tokenizer=models.byte_tokenizer(300), chat=True,
                 out_dir=out, log=io.StringIO())


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tied and an untied checkpoint, each exported as f32, q8_0 and q4_0: {tied: (result, {dtype: path})}."""
    out = {}
    for tied in (True, False):
        d = tmp_path_factory.mktemp(f"tied{int(tied)}")
        result = _train(d / "ck", tied)
        out[tied] = (result, {w: export_checkpoint(d / "ck", d / f"m-{w}.petit", w)["path"] for w in FLAGS})
    return out


def _trainer_logits(result, ids) -> np.ndarray:
    params = {n: p.astype(np.float64) for n, p in result.params.items()}
    return forward(params, result.model_config, np.array([ids]))[0][0]


@pytest.mark.parametrize("weights", FLAGS)
def test_export_cli_writes_the_file_and_prints_size_and_ratio(tmp_path, capsys, trained, weights):
    ck = trained[True][0].checkpoint
    assert _cli(["export", ck, "-o", tmp_path / "m.petit", FLAGS[weights]]) == 0
    line = capsys.readouterr().out.strip()
    size = (tmp_path / "m.petit").stat().st_size
    m = re.fullmatch(r"wrote (.+): ([\d.]+) (kB|MB) \((\w+)\), ([\d.]+)% of f32 \(([\d.]+) (kB|MB)\)", line)
    assert m, line
    assert m[1] == str(tmp_path / "m.petit") and m[4] == weights
    assert float(m[2]) * {"kB": 1e3, "MB": 1e6}[m[3]] == pytest.approx(size, rel=5e-3)
    ratio = float(m[5]) / 100
    assert ratio == pytest.approx({"f32": 1.0, "q8_0": 0.27, "q4_0": 0.15}[weights], abs=0.04)


def test_q8_0_is_the_default_and_the_flags_exclude_each_other(tmp_path, capsys, trained):
    ck = trained[True][0].checkpoint
    assert _cli(["export", ck, "-o", tmp_path / "m.petit"]) == 0
    assert "(q8_0)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        _cli(["export", ck, "-o", tmp_path / "m.petit", "--q8", "--q4"])
    assert e.value.code == 2


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("weights", FLAGS)
def test_the_file_is_self_contained(trained, tied, weights):
    result, paths = trained[tied]
    with read_petit(paths[weights]) as f:
        meta, tensors = f.metadata, f.tensors
    cfg = meta["config"]
    assert meta["format"] == "petit" and cfg["model_type"] == "llama" and cfg["rope_interleaved"] is False
    assert cfg == result.model_config and cfg["tie_word_embeddings"] is tied
    assert meta["tokenizer"] == result.tokenizer and meta["chat_template"] == result.chat_template
    assert meta["generation"]["temperature"] == 0.0
    q = meta["quantization"]
    assert q["weights"] == weights and q["tool"] == f"petit {petit.__version__} export" and q["source_step"] == 4
    assert set(meta["checksums"]["sha256"]) == set(tensors)
    assert ("lm_head.weight" in tensors) is not tied
    for name, info in tensors.items():
        assert info.dtype == (weights if len(info.shape) == 2 else "f32"), name
        assert info.shape == result.params[name].shape


@pytest.mark.parametrize("tied", [True, False])
def test_fp32_export_reproduces_the_trainer_logits(trained, tied):
    result, paths = trained[tied]
    model = petit.load(paths["f32"])
    ids = model.tokenizer.encode(PROMPT + "7<|im_end|>\n")
    want = _trainer_logits(result, ids)
    np.testing.assert_allclose(model.logits(ids), want, rtol=0, atol=1e-4)
    ref = Reference(paths["f32"])
    np.testing.assert_allclose(ref.logits(ids), want, rtol=0, atol=1e-9)
    ref.close()
    model.close()


@pytest.mark.parametrize("weights, bound", [("q8_0", 0.03), ("q4_0", 0.15)])
def test_quantized_exports_stay_close_to_the_trainer(trained, weights, bound):
    result, paths = trained[False]
    model = petit.load(paths[weights])
    ids = model.tokenizer.encode(PROMPT + "7<|im_end|>\n")
    want = _trainer_logits(result, ids)
    err = np.abs(model.logits(ids) - want).max() / np.abs(want).max()
    assert err <= bound, f"{weights}: worst error {err:.3g} of the logit scale > {bound}"
    model.close()


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("weights", FLAGS)
def test_verify_passes_on_every_export(capsys, trained, tied, weights):
    path = trained[tied][1][weights]
    assert _cli(["verify", path, "-n", "12"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("VERIFY PASS") and f"({weights} weights, hidden 64, 2 layers)" in out
    assert "chat template" in out and "checksums:   ok" in out


def test_verify_json_has_the_figures(capsys, trained):
    assert _cli(["verify", trained[True][1]["q4_0"], "--json", "--prompt", PROMPT, "-n", "5"]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in ("max_abs_err", "mean_abs_err", "max_rel_err", "mean_rel_err", "logit_scale", "argmax_agreement",
                "rounded_max_rel_err", "rounded_mean_rel_err", "checksums", "failures"):
        assert key in r, key
    assert (r["hidden_size"], r["layers"]) == (64, 2)
    assert r["pass"] is True and r["thresholds"] == limits("q4_0", 64, 2, 128) and r["weights"] == "q4_0"
    assert r["prompt"] == PROMPT and r["prompt_source"] == "given" and r["generated_tokens"] == 5
    assert r["positions"] == r["prompt_tokens"] + 5 and r["checksums"] == "ok"


def _corrupt_scales(src, dst, name="model.layers.0.mlp.down_proj.weight", blocks=(3,), factor=8.0):
    """Copy src to dst with the fp16 scales of some q8_0 blocks of `name` multiplied by `factor`."""
    shutil.copy(src, dst)
    with read_petit(src) as f:
        info = f.tensors[name]
    with open(dst, "r+b") as fh:
        (data_offset,) = struct.unpack_from("<Q", fh.read(64), 40)       # the header's data_offset field
        for block in blocks:
            at = data_offset + info.offset + block * 34
            fh.seek(at)
            d = np.frombuffer(fh.read(2), "<f2")[0]
            fh.seek(at)
            fh.write(np.float16(d * factor).astype("<f2").tobytes())


def test_verify_fails_on_a_corrupted_copy(tmp_path, capsys, trained):
    _corrupt_scales(trained[True][1]["q8_0"], tmp_path / "bad.petit")
    assert _cli(["verify", tmp_path / "bad.petit"]) == 1
    out = capsys.readouterr().out
    assert out.rstrip().endswith("VERIFY FAIL")
    assert "checksums:   MISMATCH in model.layers.0.mlp.down_proj.weight" in out


def test_verify_catches_an_engine_that_misreads_the_file(tmp_path, monkeypatch, trained):
    """The engine runs a modified copy while the reference reads the file, as a real engine bug would: four block
    scales x8 in a trained model (the probe of each matrix through the kernels shows it), the other RoPE pairing in
    a random one (the engine on the dequantized values shows it, far above float32 rounding)."""
    good = trained[True][1]["q8_0"]
    _corrupt_scales(good, tmp_path / "scale.petit", "model.layers.1.self_attn.o_proj.weight", blocks=(0, 1, 2, 3))
    models.write_model(tmp_path / "rand.petit", dtype="q8_0", seed=0)
    with read_petit(tmp_path / "rand.petit") as f:
        meta = dict(f.metadata, config=dict(f.metadata["config"], rope_interleaved=True))
        write_petit(tmp_path / "rope.petit", meta, {n: (i.dtype, i.shape, np.array(f.raw(n)))
                                                   for n, i in f.tensors.items()})
    real_load = petit.load
    monkeypatch.setattr(petit, "load", lambda p, **kw: real_load(tmp_path / "scale.petit", **kw))
    r = verify(good)
    assert not r["pass"] and r["bad_matrices"] == ["model.layers.1.self_attn.o_proj.weight"]
    assert r["matrix_max_rel_err"] > 100 * r["thresholds"]["matrix_rel_err"]
    assert any(f.startswith("1 matri(ces) multiply differently from the file's values") for f in r["failures"])
    monkeypatch.setattr(petit, "load", lambda p, **kw: real_load(tmp_path / "rope.petit", **kw))
    r = verify(tmp_path / "rand.petit")
    assert not r["pass"] and r["dequantized_max_rel_err"] > 100 * r["thresholds"]["dequantized_max_rel_err"]
    assert any(f.startswith("dequantized_max_rel_err") for f in r["failures"])
    monkeypatch.setattr(petit, "load", real_load)
    assert verify(good)["pass"] and verify(tmp_path / "rand.petit")["pass"]


def test_verify_fails_on_non_finite_logits(tmp_path, capsys, trained):
    with read_petit(trained[True][1]["f32"]) as f:
        tensors = {n: (i.dtype, i.shape, np.array(f.array(n))) for n, i in f.tensors.items()}
        meta = {k: v for k, v in f.metadata.items() if k != "checksums"}
    tensors["model.norm.weight"][2][5] = np.inf
    write_petit(tmp_path / "inf.petit", meta, tensors)
    assert _cli(["verify", tmp_path / "inf.petit", "--json"]) == 1
    r = json.loads(capsys.readouterr().out)
    assert r["finite"] is False and r["pass"] is False and r["checksums"] == "ok"   # pt64, by write_petit


VARIANTS = {"gqa": {}, "tied": {"tie_word_embeddings": True},
            "mha_interleaved": {"num_key_value_heads": 4, "rope_interleaved": True, "rope_theta": 500.0}}


@pytest.mark.parametrize("variant", VARIANTS)
def test_reference_matches_the_oracle_and_the_engine(tmp_path, variant):
    cfg = dict(models.TINY, **VARIANTS[variant])
    _, W = models.write_model(tmp_path / "m.petit", cfg, dtype="f32", seed=5)
    model = petit.load(tmp_path / "m.petit")
    ids = model.tokenizer.encode("hello world, the reference reads the file by itself")
    ref = Reference(tmp_path / "m.petit")
    got = ref.logits(ids)
    assert got.dtype == np.float64 and got.shape == (len(ids), cfg["vocab_size"]) and ref.config == cfg
    W64 = {n: w.astype(np.float64) for n, w in W.items()}
    np.testing.assert_allclose(got, oracles.llama_logits(W64, cfg, ids), rtol=0, atol=1e-9)
    np.testing.assert_allclose(model.logits(ids), got, rtol=0, atol=1e-4)
    model.close()


@pytest.mark.parametrize("dtype", ["f16", "bf16", "q8_0", "q4_0"])
def test_reference_decodes_every_block_type(tmp_path, dtype):
    """Decoded weights equal the oracle's decoding of the same bytes; with round_activations the forward equals
    the oracle's engine-like forward (activations rounded to q8 blocks) for the integer types."""
    cfg = dict(models.TINY, tie_word_embeddings=True)
    models.write_model(tmp_path / "m.petit", cfg, dtype=dtype, seed=2)
    quantized = dtype in ("q8_0", "q4_0")
    ref = Reference(tmp_path / "m.petit", round_activations=quantized)
    W = {}
    with read_petit(tmp_path / "m.petit") as f:
        for n, i in f.tensors.items():
            W[n] = oracles.dequantize(np.array(f.raw(n)), i.dtype, i.shape).astype(np.float64) \
                if len(i.shape) == 2 else np.array(f.array(n), np.float64)
            np.testing.assert_array_equal(ref.weight(n), W[n])
    ids = [5, 260, 17, 99, 3, 0, 270, 42]
    np.testing.assert_allclose(ref.logits(ids), oracles.llama_logits(W, cfg, ids, quantized_acts=quantized),
                               rtol=0, atol=1e-9)


def test_reference_shares_no_code_with_the_engine():
    """No module of the reference package imports petit, nor any trainer module outside the package."""
    import trainer.reference as package
    files = sorted(Path(package.__file__).parent.rglob("*.py"))
    assert len(files) >= 9
    for path in files:
        tree = ast.parse(path.read_text())
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0]
        bad = [m for m in imported if m.split(".")[0] == "petit" or
               (m.split(".")[0] == "trainer" and not m.startswith("trainer.reference"))]
        assert not bad, (path.name, bad)


def test_verify_a_model_without_chat_template_uses_plain_text(tmp_path, capsys):
    models.write_model(tmp_path / "m.petit", dtype="q8_0", seed=1)
    assert _cli(["verify", tmp_path / "m.petit", "--json", "-n", "8"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["prompt"] == "Once upon a time" and r["checksums"] == "ok" and r["pass"] is True


def test_export_refuses_columns_that_do_not_fit_blocks(tmp_path, capsys):
    vocab = _train(tmp_path / "ck", dim=48, ffn=96).model_config["vocab_size"]
    assert _cli(["export", tmp_path / "ck", "-o", tmp_path / "m.petit", "--q4"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("petit export: error: tensor model.embed_tokens.weight of shape ")
    assert f"({vocab}, 48)" in err and "multiple of 32" in err and "export with --f32" in err
    assert not (tmp_path / "m.petit").exists()
    assert _cli(["export", tmp_path / "ck", "-o", tmp_path / "m.petit", "--fp32"]) == 0
    assert _cli(["verify", tmp_path / "m.petit", "-n", "4"]) == 0


def test_errors_are_one_line(tmp_path, capsys):
    assert _cli(["export", tmp_path / "nope", "-o", tmp_path / "m.petit"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("petit export: error: checkpoint ") and "does not exist" in err
    assert _cli(["verify", tmp_path / "nope.petit"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("petit verify: error: ") and "not found" in err
    (tmp_path / "junk.petit").write_bytes(b"not a model at all, just some bytes" * 3)
    assert _cli(["verify", tmp_path / "junk.petit", "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["pass"] is False and captured.err.count("\n") == 1
    with pytest.raises(ValueError, match="not a .petit file"):
        Reference(tmp_path / "junk.petit")
