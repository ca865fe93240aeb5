"""What every `petit` command shares: the bundled model as the default, the f32 spelling (fp32 kept as an alias),
`--version`, and one exit code per kind of failure: 2 for a command line that cannot work, 1 for a runtime error."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import petit
from petit.cli.commands import build_parser, main

import models

PETIT = [sys.executable, "-m", "petit.cli"]
ASSETS = Path(__file__).resolve().parents[1] / "assets"
PROMPT = "<|im_start|>user\nwhat is 3 plus 4?<|im_end|>\n<|im_start|>assistant\n"


def test_run_defaults_to_the_bundled_model_and_takes_it_as_MODEL_too(capsys):
    assert main(["run", "-p", PROMPT, "-n", "4", "-t", "0"]) == 0
    assert capsys.readouterr().out == PROMPT + "7\n"
    assert main(["run", str(ASSETS / "default-q4_0.petit"), "-p", PROMPT, "-n", "4", "-t", "0"]) == 0
    assert capsys.readouterr().out == PROMPT + "7\n"


def test_version():
    r = subprocess.run([*PETIT, "--version"], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"petit {petit.__version__}\n", "")


@pytest.mark.parametrize("argv", [
    ["run", "--weights", "fp32"], ["chat", "--weights", "fp32"], ["serve", "--weights", "fp32"],
    ["run", "--weights", "f32"], ["convert", "F", "-o", "M", "--f32"], ["convert", "F", "-o", "M", "--fp32"],
    ["export", "C", "-o", "M", "--f32"], ["export", "C", "-o", "M", "--fp32"],
])
def test_f32_is_spelled_f32_everywhere_and_fp32_still_works(argv):
    assert build_parser().parse_args(argv).weights == "f32"


def test_weights_fp32_runs_the_f32_weights(tmp_path, capsys):
    models.write_model(tmp_path / "m.petit", dtype="q8_0")
    outs = []
    for weights in ("f32", "fp32", "q8_0"):
        assert main(["run", str(tmp_path / "m.petit"), "-p", "hello", "-n", "12", "-t", "0", "--weights", weights]) == 0
        outs.append(capsys.readouterr().out)
    model = petit.load(tmp_path / "m.petit", weights="f32")
    steps = petit.stream_text(model, model.tokenizer.encode("hello"), max_tokens=12, stop_ids=[model.tokenizer.eos_id])
    assert outs[0] == outs[1] == "hello" + "".join(s.text for s in steps) + "\n"


def _petit(argv, capsys):
    """(exit code, stderr) of `petit ARGV`, run in this process; argparse's usage errors included."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    return code, capsys.readouterr().err


# usage errors: exit 2, the last line of stderr says what is wrong (argparse adds a usage line before it)
@pytest.mark.parametrize("argv, line", [
    (["run", "a.petit", "-m", "b.petit"], "petit run: error: give the model once: as MODEL or with -m, not both"),
    (["run", "-t", "-1"], "petit run: error: temperature must be a finite number >= 0, got -1.0"),
    (["run", "-g", "merges.txt"], "petit run: error: -g/--merges needs -v/--vocab"),
    (["run", "--weights", "f64"], "petit run: error: argument --weights: invalid choice: 'f64' "
                                  "(choose from 'f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q5_0', 'q4_k', 'q5_k', 'q6_k', "
                                  "'q4_k_m')"),
    (["chat", "a.petit", "-m", "b.petit"], "petit chat: error: give the model once: as MODEL or with -m, not both"),
    (["chat", "-s", "1.5"], "petit chat: error: top_p must be a number in (0, 1] (1 = off), got 1.5"),
    (["chat", "--threads", "0"], "petit chat: error: argument --threads: expected a positive integer, got 0"),
    (["chat", "--threads", "999"], "petit chat: error: argument --threads: expected 1 to 256 threads, got 999"),
    (["chat", "--ctx", "0"], "petit chat: error: argument --ctx: expected a positive integer, got 0"),
    (["chat", "--drop-old-turns", "--keep-old-turns"],
     "petit chat: error: argument --keep-old-turns: not allowed with argument --drop-old-turns"),
    (["chat"] + ["--stop", "x"] * 65, "petit chat: error: 65 stop strings given; at most 64 are supported"),
    (["chat", "--stop", "x" * 1001],
     "petit chat: error: stop string 0 is 1001 characters long; at most 1000 are supported"),
    (["serve", "a.petit", "-m", "b.petit"], "petit serve: error: give the model once: as MODEL or with -m, not both"),
    (["serve", "-n", "0"], "petit serve: error: -n/--max-tokens must be at least 1"),
    (["serve", "--min-p", "2"], "petit serve: error: min_p must be a number in [0, 1] (0 = off), got 2.0"),
    (["serve", "--port", "70000"], "petit serve: error: argument --port: expected a port number 0-65535, got 70000"),
    (["serve", "--max-body", "0"], "petit serve: error: argument --max-body: expected a positive integer, got 0"),
    (["serve", "--max-batch", "0"], "petit serve: error: argument --max-batch: expected a positive integer, got 0"),
    (["convert", "F", "-o", "M", "--q8", "--q4"],
     "petit convert: error: argument --q4/--q4_0: not allowed with argument --q8/--q8_0"),
    (["convert", "F"], "petit convert: error: the following arguments are required: -o/--output"),
    (["export", "C"], "petit export: error: the following arguments are required: -o/--output"),
    (["verify", "M", "-n", "x"], "petit verify: error: argument -n/--tokens: expected an integer, got 'x'"),
    (["train", "--corpus", "missing.txt", "-o", "O", "--threads", "0"],
     "petit train: error: --threads must be a positive integer, got 0"),
    (["info", "--bogus"], "petit: error: unrecognized arguments: --bogus"),
])
def test_a_command_line_that_cannot_work_exits_2(argv, line, capsys):
    code, err = _petit(argv, capsys)
    assert (code, err.splitlines()[-1]) == (2, line)


# runtime errors: exit 1, one line on stderr
@pytest.mark.parametrize("argv, line", [
    (["run", "TMP/missing.petit"], "petit run: error: TMP/missing.petit: file not found"),
    (["chat", "TMP/missing.petit"], "petit chat: error: TMP/missing.petit: file not found"),
    (["serve", "TMP/missing.petit", "--port", "0"], "petit serve: error: TMP/missing.petit: file not found"),
    (["run", "-m", "TMP"], "petit run: error: TMP: config.json is missing (a Hugging Face model folder needs "
                           "config.json, the weights and tokenizer.json)"),
    (["serve", "-m", "TMP", "--port", "0"], "petit serve: error: TMP: config.json is missing (a Hugging Face model "
                                            "folder needs config.json, the weights and tokenizer.json)"),
    (["convert", "TMP/missing", "-o", "TMP/m.petit"],
     "petit convert: error: TMP/missing: no such file or folder (petit convert reads a Hugging Face model folder, a "
     "GGUF file or a .petit file)"),
    (["export", "TMP/missing", "-o", "TMP/m.petit"],
     "petit export: error: checkpoint TMP/missing does not exist or is not a directory"),
    (["train", "--corpus", "TMP/missing.txt", "-o", "TMP/o"],
     "petit train: error: corpus file TMP/missing.txt does not exist"),
])
def test_a_runtime_error_exits_1_with_one_line(argv, line, tmp_path, capsys):
    if argv[0] == "serve":
        pytest.importorskip("starlette")
        pytest.importorskip("uvicorn")
    argv = [a.replace("TMP", str(tmp_path)) for a in argv]
    code, err = _petit(argv, capsys)
    assert (code, err) == (1, line.replace("TMP", str(tmp_path)) + "\n")


def test_verify_keeps_2_for_any_error_as_diff_does(tmp_path, capsys):
    # 1 means VERIFY FAIL (a result, not an error): a missing file is 2, like a bad flag
    code, err = _petit(["verify", str(tmp_path / "missing.petit")], capsys)
    assert (code, err) == (2, f"petit verify: error: {tmp_path / 'missing.petit'}: file not found\n")


def test_serve_on_a_missing_model_says_what_run_says(tmp_path):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    missing = str(tmp_path / "nope.petit")
    run = subprocess.run([*PETIT, "run", missing], capture_output=True, text=True, timeout=60)
    serve = subprocess.run([*PETIT, "serve", missing, "--port", "0"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PETIT_API_KEY=""))
    assert run.returncode == serve.returncode == 1
    assert run.stderr.replace("petit run:", "petit serve:") == serve.stderr == \
        f"petit serve: error: {missing}: file not found\n"
