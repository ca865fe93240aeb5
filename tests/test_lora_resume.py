"""A fine-tuning run stopped and resumed from its checkpoint ends with the same adapter, bit for bit, as a run never
stopped (issue 33: pause / resume, the checkpoint survives a crash); a checkpoint of another run is refused by name."""
import os
import shutil

import numpy as np
import pytest

import petit
from petit.cli import main
from trainer.lora.train import FinetuneConfig, Hooks, finetune

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "fixtures", "hf", "qwen3")
FACTS = os.path.join(HERE, "fixtures", "lora5", "facts.jsonl")


def _cfg(**kw):
    return FinetuneConfig(**{"rank": 2, "alpha": 4.0, "epochs": 2, "lr": 3e-3, "ctx": 48, "warmup": 2, "batch": 2,
                             "targets": ("q", "v", "down"), **kw})


def _run(model, out, cfg, **kw):
    return finetune(model, FACTS, str(out), cfg, out=open(os.devnull, "w"), **kw)


@pytest.fixture(scope="module")
def model():
    return petit.load(MODEL, weights="f32")


@pytest.fixture(scope="module")
def straight(model, tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "a.lora"
    steps = []
    stats = _run(model, out, _cfg(), hooks=Hooks(on_step=steps.append))
    return out, stats, steps


@pytest.mark.parametrize("stop_after", [1, 3, "epoch"])
def test_a_stopped_run_resumed_ends_with_the_same_adapter(model, straight, tmp_path, stop_after):
    out, stats, steps = straight
    per_epoch = steps[-1]["steps"] // 2
    stop_at = per_epoch if stop_after == "epoch" else stop_after      # "epoch": the last step of the first epoch
    ck, out2 = tmp_path / "run", tmp_path / "b.lora"
    seen, saved = [], []
    first = _run(model, out2, _cfg(), checkpoint=str(ck),
                 hooks=Hooks(on_step=seen.append, should_stop=lambda: len(seen) >= stop_at,
                             on_checkpoint=saved.append))
    assert first["interrupted"] and first["steps"] == stop_at and saved == [str(ck)] and not out2.exists()
    second = _run(model, out2, _cfg(), checkpoint=str(ck), resume=True, hooks=Hooks(on_step=seen.append))
    assert not second["interrupted"] and [s["step"] for s in seen] == list(range(1, 2 * per_epoch + 1))
    assert [s["loss"] for s in seen] == [s["loss"] for s in steps]          # the same losses, step for step
    for name, p in stats["params"].items():
        assert np.array_equal(second["params"][name], p), name
    assert [(h["train_loss"], h["val_loss"]) for h in second["history"]] == \
        [(h["train_loss"], h["val_loss"]) for h in stats["history"]]
    assert out2.read_bytes() == out.read_bytes()


def test_a_checkpoint_of_another_run_is_refused(model, tmp_path):
    ck = tmp_path / "run"
    _run(model, tmp_path / "a.lora", _cfg(epochs=1), checkpoint=str(ck))
    with pytest.raises(ValueError) as e:
        _run(model, tmp_path / "b.lora", _cfg(rank=3), checkpoint=str(ck), resume=True)
    assert str(e.value) == f"checkpoint {ck} was made with other settings: rank 2 (now 3)"
    other = petit.load(MODEL, weights="q8_0")
    with pytest.raises(ValueError) as e:
        _run(other, tmp_path / "b.lora", _cfg(), checkpoint=str(ck), resume=True)
    assert str(e.value) == f"checkpoint {ck} was made on {model.path} (f32 weights), not on {model.path} (q8_0)"
    # a save torn by a crash between two renames is found by the digests, not resumed from mixed steps
    torn = tmp_path / "torn"
    shutil.copytree(ck, torn)
    (torn / "optimizer.npz").write_bytes((torn / "optimizer.npz").read_bytes()[:-7])
    with pytest.raises(ValueError, match="optimizer.npz does not match config.json"):
        _run(model, tmp_path / "b.lora", _cfg(epochs=1), checkpoint=str(torn), resume=True)
    with pytest.raises(ValueError, match="is not a trainer checkpoint|does not exist"):
        _run(model, tmp_path / "b.lora", _cfg(), checkpoint=str(tmp_path / "none"), resume=True)


def test_cli_checkpoint_and_resume(tmp_path, capsys):
    out, ck = tmp_path / "a.lora", tmp_path / "run"
    args = ["finetune", MODEL, "--data", FACTS, "-o", str(out), "--rank", "2", "--ctx", "48", "--targets", "q,v",
            "--batch", "4", "--checkpoint", str(ck)]
    assert main(args) == 0 and out.exists() and (ck / "config.json").exists()
    capsys.readouterr()
    assert main(args + ["--epochs", "2", "--resume"]) == 0       # one epoch more on the saved run
    printed = capsys.readouterr().out
    assert f"resumed from {ck} at step" in printed and "epoch 2/2: train loss" in printed
    assert "epoch 1/2" not in printed
    assert main(["finetune", MODEL, "--data", FACTS, "-o", str(out), "--resume"]) == 2
    assert "--resume needs --checkpoint DIR" in capsys.readouterr().err
