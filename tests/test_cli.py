"""`petit run` and `petit info` as a user runs them: exact text on stdout, exit codes, messages on stderr."""
import os
import subprocess
import sys

import numpy as np
import pytest

import petit
from petit.cli import main
from petit.tokenizer import Tokenizer

import models

PETIT = [sys.executable, "-m", "petit.cli"]       # this checkout's petit, whatever is on PATH


@pytest.fixture
def model_file(tmp_path):
    models.write_model(tmp_path / "m.petit", dtype="q8_0")
    return str(tmp_path / "m.petit")


def _greedy_text(path, prompt, n):
    model = petit.load(path)
    ids = model.tokenizer.encode(prompt)
    steps = list(petit.stream_text(model, ids, max_tokens=n, stop_ids=[model.tokenizer.eos_id]))
    return model, ids, [s.token for s in steps], "".join(s.text for s in steps)


def test_run_streams_the_prompt_and_its_greedy_completion(model_file, capsys):
    assert main(["run", "-m", model_file, "-p", "hello world", "-n", "10", "-t", "0"]) == 0
    out, err = capsys.readouterr()
    _, ids, _, text = _greedy_text(model_file, "hello world", 10)
    assert out == "hello world" + text + "\n"
    assert f"[{len(ids)} prompt tokens, 10 generated" in err


def test_no_mmap_reads_the_weights_into_memory_and_answers_the_same(model_file, capsys):
    """--no-mmap (petit.load(..., mmap=False)): the weights are read into private memory on huge pages instead
    of being mapped, which decodes faster; every logit and the streamed text are exactly those of the mapped file."""
    mapped, in_memory = petit.load(model_file), petit.load(model_file, mmap=False)
    ids = mapped.tokenizer.encode("hello world")
    assert np.array_equal(mapped.logits(ids), in_memory.logits(ids))
    for argv in ([], ["--no-mmap"], ["--no-repack"]):
        assert main(["run", "-m", model_file, "-p", "hello world", "-n", "10", "-t", "0", *argv]) == 0
    first, second, third = capsys.readouterr().out.split("\n")[:3]
    assert first == second == third == "hello world" + _greedy_text(model_file, "hello world", 10)[3]


def test_run_with_a_seed_is_reproducible_and_seeds_differ(model_file, capsys):
    outs = []
    for seed in (1, 1, 2):
        main(["run", "-m", model_file, "-p", "hello", "-n", "24", "-t", "1.5", "--seed", str(seed)])
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0] != outs[2]


def test_dump_logits_writes_every_position(model_file, tmp_path, capsys):
    dump = tmp_path / "logits.npy"
    assert main(["run", "-m", model_file, "-p", "hello world", "-n", "6", "-t", "0", "--dump-logits", str(dump)]) == 0
    model, ids, tokens, _ = _greedy_text(model_file, "hello world", 6)
    logits = np.load(dump)
    assert logits.shape == (len(ids) + 6, model.vocab_size)
    np.testing.assert_allclose(logits, model.logits(ids + tokens), rtol=0, atol=1e-4)
    assert "wrote logits" in capsys.readouterr().err
    assert [p for p in os.listdir(tmp_path) if ".tmp" in p] == []


def test_run_with_an_external_vocab_and_merges(tmp_path, capsys):
    tok = models.byte_tokenizer(300)
    models.write_model(tmp_path / "m.petit", tokenizer=False)
    (tmp_path / "vocab.txt").write_text("\n".join(tok["vocab"]) + "\n", encoding="utf-8")
    (tmp_path / "merges.txt").write_text("\n".join(" ".join(m) for m in tok["merges"]) + "\n", encoding="utf-8")
    argv = ["run", "-m", str(tmp_path / "m.petit"), "-p", "hello", "-n", "5", "-t", "0"]
    assert main(argv) == 1
    assert "has no tokenizer; give one with -v VOCAB" in capsys.readouterr().err
    assert main(argv + ["-v", str(tmp_path / "vocab.txt"), "-g", str(tmp_path / "merges.txt")]) == 0
    out = capsys.readouterr().out
    tokenizer = Tokenizer.from_files(tmp_path / "vocab.txt", tmp_path / "merges.txt")
    model = petit.load(tmp_path / "m.petit", tokenizer=tokenizer)
    assert tokenizer.eos_id is None          # a vocab file does not say which token ends text
    steps = petit.stream_text(model, tokenizer.encode("hello"), max_tokens=5)
    assert out == "hello" + "".join(s.text for s in steps) + "\n"


@pytest.mark.parametrize("argv,message", [
    (["run", "-m", "M", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "-m"], "argument -m/--model: expected one argument"),
    (["run", "-m", "M", "-n", "ten"], "argument -n/--tokens: expected an integer, got 'ten'"),
    (["run", "-m", "M", "-t", "hot"], "argument -t/--temperature: expected a number, got 'hot'"),
    (["fly"], "invalid choice: 'fly'"),
])
def test_wrong_flags_print_usage_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "usage: petit" in err and message in err


@pytest.mark.parametrize("extra,message", [
    (["-t", "-1"], "temperature must be a finite number >= 0, got -1.0"),
    (["-s", "1.5"], "top_p must be a number in (0, 1] (1 = off), got 1.5"),
    (["-g", "merges.txt"], "-g/--merges needs -v/--vocab"),
])
def test_bad_values_are_one_line_usage_errors(model_file, extra, message, capsys):
    assert main(["run", "-m", model_file, "-p", "hi"] + extra) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"petit run: error: {message}"


def test_missing_and_corrupt_model_files(tmp_path, capsys):
    assert main(["run", "-m", str(tmp_path / "nope.petit"), "-p", "hi"]) == 1
    assert "nope.petit" in capsys.readouterr().err
    (tmp_path / "junk.petit").write_bytes(b"JUNK" + bytes(100))
    assert main(["run", "-m", str(tmp_path / "junk.petit"), "-p", "hi"]) == 1
    err = capsys.readouterr().err
    assert "junk.petit" in err and "magic" in err and "Traceback" not in err
    (tmp_path / "junk.gguf").write_bytes(b"GGUF" + bytes(100))          # a GGUF file is told by its first bytes
    assert main(["run", "-m", str(tmp_path / "junk.gguf"), "-p", "hi"]) == 1
    assert capsys.readouterr().err == (f"petit run: error: {tmp_path / 'junk.gguf'}: version: GGUF version 0 is not "
                                       f"supported (versions 2 and 3 are)\n")


def test_petit_command_and_info(model_file):
    r = subprocess.run([*PETIT, "info"], capture_output=True, text=True,
                       env=dict(os.environ, PETIT_ISA="scalar", PETIT_THREADS="1"))
    assert r.returncode == 0
    assert "chosen path:    scalar" in r.stdout and "threads:        1" in r.stdout and "cpu features:" in r.stdout
    assert "matrices:       q8_0 / q4_0 rows as stored\n" in r.stdout       # the scalar path reads plain rows
    r = subprocess.run([*PETIT, "run", "-m", model_file, "-p", "hello", "-n", "3", "-t", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("hello")
    r = subprocess.run([sys.executable, "-m", "petit", "info"], capture_output=True, text=True)   # petit/__main__.py
    assert r.returncode == 0 and r.stdout.startswith(f"petit {petit.__version__}\n")


def test_importing_petit_does_not_import_qt():
    code = "import sys, petit, petit.model, petit.cli; print(any(m.startswith(('PySide', 'PyQt')) for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_petit_train_check_runs_the_gradient_check(capsys):
    assert main(["train", "--check"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "FAIL" not in out


def test_unknown_config_keys_are_a_one_line_warning(tmp_path):
    cfg = dict(models.TINY, is_llama_config=True)
    models.write_model(tmp_path / "m.petit", cfg)
    r = subprocess.run([*PETIT, "run", "-m", str(tmp_path / "m.petit"), "-p", "hi", "-n", "1"],
                       capture_output=True, text=True)
    assert r.returncode == 0
    assert "petit: warning: config: ignoring unknown key(s) is_llama_config\n" in r.stderr
    assert "warnings.warn" not in r.stderr


def test_chat_streams_replies_line_by_line_and_resets():
    asset = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "default-q8_0.petit")
    r = subprocess.run([*PETIT, "chat", "-m", asset],
                       input="what is 12 plus 7?\nwhich is bigger, 2 or 16?\n/reset\nwhat comes after C?\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert r.stdout == "19\n16\nD\n"
    assert "(conversation reset)" in r.stderr


def test_chat_says_when_the_context_is_full_and_goes_on(tmp_path):
    asset = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "default-q8_0.petit")
    r = subprocess.run([*PETIT, "chat", "-m", asset], input="word " * 200 + "\nwhat is 12 plus 7?\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "19\n"
    assert "no longer fits the context (128 tokens, 127 for the prompt at most), even with only this message" in r.stderr


def test_chat_system_command_stats_and_exit():
    asset = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "default-q8_0.petit")
    r = subprocess.run([*PETIT, "chat", "-m", asset, "--stats"],
                       input="what is 12 plus 7?\n/system be brief\nwhat comes after C?\n/exit\nnever read\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "19\nD\n"
    stats = [l for l in r.stderr.splitlines() if l.startswith("[")]
    assert len(stats) == 2 and stats[0].startswith("[14 prompt tokens (0 reused), 2 generated; first token")


def test_chat_without_a_model_uses_the_bundled_one():
    r = subprocess.run([*PETIT, "chat"], input="what is 12 plus 7?\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "19\n"
    assert "default-q8_0.petit (853k parameters, 4 layers, q8_0 weights, int8 KV cache, context 128" in r.stderr
    r = subprocess.run([*PETIT, "chat", "a.petit", "-m", "b.petit"], input="", capture_output=True, text=True)
    assert r.returncode == 2 and "give the model once" in r.stderr


def test_chat_formats_and_raw_mode(tmp_path):
    asset = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "default-q8_0.petit")
    r = subprocess.run([*PETIT, "chat", asset, "--format", "chatml"], input="what is 12 plus 7?\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "19\n" and "format: chatml" in r.stderr
    models.write_model(tmp_path / "m.petit")                 # no chat template: raw mode, said on stderr
    r = subprocess.run([*PETIT, "chat", str(tmp_path / "m.petit"), "-n", "4", "--greedy"], input="hello\n",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "no chat template: raw mode" in r.stderr and "format: raw" in r.stderr
    model = petit.load(tmp_path / "m.petit")
    ids = model.tokenizer.encode("hello")
    steps = petit.stream_text(model, ids, max_tokens=4, stop_ids=[model.tokenizer.eos_id])
    assert r.stdout == "".join(s.text for s in steps) + "\n"


def test_chat_ctrl_c_at_the_prompt_does_not_exit():
    import signal
    import time
    import select

    def next_stderr_line():             # never hang the suite: a child that stays silent fails the test
        assert select.select([p.stderr], [], [], 60)[0], "petit chat printed nothing on stderr for 60 s"
        return p.stderr.readline()

    # a CI runner may start us with SIGINT ignored, which Python (and so the child) would inherit
    p = subprocess.Popen([*PETIT, "chat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, bufsize=1, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert next_stderr_line().startswith("petit chat:")      # the banner: the REPL is about to read
        time.sleep(0.5)                                           # let it block in readline (not a timing check)
        p.send_signal(signal.SIGINT)
        assert next_stderr_line() == "\n"                        # the interrupt was handled: a fresh prompt
        out, err = p.communicate("what is 12 plus 7?\n", timeout=60)   # only now type: no race with the signal
    finally:
        p.kill()
    assert p.returncode == 0 and out == "19\n"


def test_chat_runs_a_hugging_face_folder_end_to_end():
    from pathlib import Path
    from petit.generation import Params, Session
    folder = Path(__file__).parent / "fixtures" / "hf" / "qwen2"
    r = subprocess.run([*PETIT, "chat", str(folder), "--greedy", "--max-new-tokens", "6", "--weights", "f32"],
                       input="hello\n/reset\nhello\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"petit chat: {folder} (" in r.stderr and "format: model's template" in r.stderr
    model = petit.load(folder, weights="f32")
    reply = "".join(s.text for s in Session(model).reply([{"role": "user", "content": "hello"}], Params(max_tokens=6)))
    assert r.stdout == f"{reply}\n{reply}\n"          # /reset: the same first turn again


def test_chat_ctrl_c_mid_reply_stops_the_reply_not_the_program(tmp_path):
    import select
    import signal
    cfg = dict(models.TINY, max_position_embeddings=4096)
    models.write_model(tmp_path / "long.petit", cfg)       # raw mode, no EOS: it talks until -n or Ctrl+C
    p = subprocess.Popen([*PETIT, "chat", str(tmp_path / "long.petit"), "-n", "4000", "--greedy"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        p.stdin.write("hello\n")
        p.stdin.flush()
        assert select.select([p.stdout], [], [], 60)[0], "no reply streamed"
        p.send_signal(signal.SIGINT)                        # while the reply streams
        p.stdin.write("/exit\n")
        p.stdin.flush()
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0 and " [stopped]" in err and "interrupted" not in err
    assert len(out) < 4000                                   # the reply ended early
