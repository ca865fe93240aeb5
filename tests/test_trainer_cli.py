"""The `petit train` subcommand via trainer.cli, end to end on a few steps."""

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.checkpoint import load_checkpoint
from trainer.cli import add_train_parser, main

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--tokenizer", "char", "--layers", "1", "--dim", "16", "--heads", "2", "--kv-heads", "1", "--ffn", "32",
        "--context", "16", "--batch", "4", "--eval-interval", "3", "--seed", "5", "-q"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("the cat sat on the mat. the dog ate the log. " * 20, encoding="utf-8")
    return path


def test_train_end_to_end(tmp_path, corpus, capsys):
    out = tmp_path / "ckpt"
    assert main(["train", "--corpus", str(corpus), "-o", str(out), "--steps", "6", *TINY]) == 0
    stdout = capsys.readouterr().out
    ck = load_checkpoint(out)
    assert ck.step == 6 and ck.tokenizer["type"] == "char" and ck.model_config["hidden_size"] == 16
    m = re.search(r"final loss (\d+\.\d+) \| val loss (\d+\.\d+) after 6 steps", stdout)
    assert m, stdout
    assert float(m.group(1)) == pytest.approx(ck.history["loss"][-1], abs=5e-5)
    assert float(m.group(2)) == pytest.approx(ck.history["val"][-1][1], abs=5e-5)
    assert f"checkpoint: {out}" in stdout
    assert ck.data["source"] == "file" and ck.data["path"] == str(corpus.resolve())

    # resume to more steps: the corpus comes from the checkpoint, -o defaults to the resumed directory
    assert main(["train", "--resume", str(out), "--steps", "9", "-q"]) == 0
    assert load_checkpoint(out).step == 9
    assert "after 9 steps" in capsys.readouterr().out


def test_missing_corpus_file_exit_1(tmp_path, capsys):
    missing = tmp_path / "nope.txt"
    assert main(["train", "--corpus", str(missing), "-o", str(tmp_path / "o")]) == 1     # runtime, as `petit run`
    err = capsys.readouterr().err
    assert f"corpus file {missing} does not exist" in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["train", "-o", "OUT"], "give --corpus FILE or --chat-corpus"),
    (["train", "--corpus", "CORPUS"], "give an output directory with -o"),
    (["train", "--corpus", "CORPUS", "-o", "OUT", "--heads", "3"], r"dim \(128\) must be a multiple of"),
    (["train", "--corpus", "CORPUS", "-o", "OUT", "--threads", "0"], "--threads must be a positive integer"),
    (["train", "--corpus", "CORPUS", "-o", "OUT", "--lr", "-1"], r"lr must be in \(0.0, 10.0\), got -1.0"),
    (["train", "--chat-corpus", "-o", "OUT", "--chat-examples", "0"], "--chat-examples must be a positive"),
    (["train", "--corpus", "CORPUS.missing", "-o", "OUT", "--threads", "0"], "--threads must be a positive integer"),
])
def test_bad_flags_exit_2(tmp_path, corpus, capsys, argv, message):
    argv = [a.replace("CORPUS", str(corpus)).replace("OUT", str(tmp_path / "out")) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and err.startswith("petit train: error:"), err


@pytest.mark.parametrize("argv, message", [
    (["train", "--corpus", "CORPUS", "-o", "OUT", "--context", "4096"], "the corpus has .* tokens"),
    (["train", "--resume", "OUT/none"], "does not exist or is not a directory"),
    (["train", "--corpus", "OUT", "-o", "OUT/o"], "corpus file .* is a directory, not a text file"),
])
def test_inputs_that_do_not_work_exit_1(tmp_path, corpus, capsys, argv, message):
    (tmp_path / "out").mkdir()
    argv = [a.replace("CORPUS", str(corpus)).replace("OUT", str(tmp_path / "out")) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert re.search(message, err) and err.startswith("petit train: error:") and err.count("\n") == 1, err


def test_refuses_to_overwrite_and_resume_cannot_change_model(tmp_path, corpus, capsys):
    out = tmp_path / "ckpt"
    assert main(["train", "--corpus", str(corpus), "-o", str(out), "--steps", "2", *TINY]) == 0
    assert main(["train", "--corpus", str(corpus), "-o", str(out), "--steps", "2", *TINY]) == 1
    assert f"{out} already holds a checkpoint; continue it with --resume" in capsys.readouterr().err
    assert main(["train", "--resume", str(out), "--dim", "32"]) == 2
    assert "--dim cannot change when resuming" in capsys.readouterr().err


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--steps", "many"])
    assert e.value.code == 2 and "invalid int value: 'many'" in capsys.readouterr().err


@pytest.mark.parametrize("worst, code, verdict", [(3e-9, 0, "PASS"), (2e-3, 1, "FAIL")])
def test_check_flag_prints_errors_and_verdict(monkeypatch, capsys, worst, code, verdict):
    # the real check of every tensor runs in test_trainer_layers.py; here only the CLI wiring and report
    from trainer import gradcheck

    def fake(tied=True, seed=0, names=None):
        return {"model.embed_tokens.weight": 1e-9, "model.norm.weight": worst,
                **({} if tied else {"lm_head.weight": 2e-9})}

    monkeypatch.setattr(gradcheck, "check_gradients", fake)
    assert main(["train", "--check"]) == code
    out = capsys.readouterr().out
    row = rf"model\.norm\.weight +{worst:.2e} +{'ok' if code == 0 else 'FAIL'}"
    assert "lm_head.weight" in out and re.search(row, out)
    assert out.rstrip().splitlines()[-1] == verdict


def test_plugs_into_another_parser():
    parser = argparse.ArgumentParser(prog="petit")
    sub = parser.add_subparsers(dest="command")
    add_train_parser(sub)
    args = parser.parse_args(["train", "--chat-corpus", "-o", "x", "--steps", "5"])
    assert args.chat_corpus and args.steps == 5 and args.func.__name__ == "run_train"


def test_python_m_trainer_cli(tmp_path, corpus):
    proc = subprocess.run([sys.executable, "-m", "trainer.cli", "train", "--corpus", str(corpus), "-o",
                           str(tmp_path / "ck"), "--steps", "2", *TINY], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "final loss" in proc.stdout and (tmp_path / "ck" / "weights.npz").is_file()


def test_ctrl_c_saves_and_exits_130(tmp_path, corpus, capsys, monkeypatch):
    from trainer.parallel import StepRunner

    real = StepRunner.loss_and_grads
    calls = {"n": 0}

    def interrupted_on_third_step(self, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(StepRunner, "loss_and_grads", interrupted_on_third_step)
    out = tmp_path / "ckpt"
    assert main(["train", "--corpus", str(corpus), "-o", str(out), "--steps", "6", *TINY]) == 130
    captured = capsys.readouterr()
    assert f"interrupted at step 2/6; checkpoint saved to {out} (continue with --resume {out})" in captured.err
    assert load_checkpoint(out).step == 2 and "Traceback" not in captured.err


def test_diverging_loss_exits_1(tmp_path, corpus, capsys, monkeypatch):
    from trainer.parallel import StepRunner

    monkeypatch.setattr(StepRunner, "loss_and_grads", lambda self, *a: (float("nan"), {}))
    assert main(["train", "--corpus", str(corpus), "-o", str(tmp_path / "o"), "--steps", "3", *TINY]) == 1
    assert "the loss became nan at step 1; try a lower learning rate" in capsys.readouterr().err
    assert not (tmp_path / "o" / "weights.npz").exists()


def test_output_that_is_a_file_exit_1(tmp_path, corpus, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["train", "--corpus", str(corpus), "-o", str(target), *TINY]) == 1
    assert f"output {target} exists and is not a directory" in capsys.readouterr().err
