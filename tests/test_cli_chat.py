"""`petit chat` as a user types to it: a full context forgets the oldest turns and says so, a reply cut by the
context says so, the /commands, and line editing with a history kept across runs (through a pseudo-terminal).

The bundled model (a 128-token context) answers these questions greedily; stdout and stderr are read merged, so the
order of replies and notices is the order the user sees them in."""
import os
import select
import subprocess
import sys
import time

import pytest

PETIT = [sys.executable, "-m", "petit.cli"]
QUESTIONS = ["what is 12 plus 7?", "which is bigger, 2 or 16?", "what comes after C?", "count from 3 to 6",
             "reverse the word apple", "what is 9 minus 4?", "what colour is a banana?", "count from 1 to 9",
             "what is 3 plus 4?"]
ANSWERS = ["19", "16", "D", "3 4 5 6", "elppa", "5", "yellow", "1 2 3 4 5 6 7 8 9", "7"]


def chat(args, lines):
    """Everything `petit chat ARGS` prints (stdout and stderr merged) after its banner, given these input lines."""
    r = subprocess.run([*PETIT, "chat", "-t", "0", *args], input="".join(f"{line}\n" for line in lines),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    banner = next(i for i, line in enumerate(lines) if line.endswith("/help lists the commands, /exit leaves."))
    return lines[banner + 1:]


def test_a_full_context_forgets_the_oldest_turns_and_says_so():
    dropped = "[dropped the oldest turn to fit the 128-token context]"
    assert chat([], QUESTIONS) == ANSWERS[:5] + [dropped, "5", dropped, "yellow", dropped, ANSWERS[7], dropped, "7"]


def test_keep_old_turns_refuses_once_full_and_says_when_a_reply_was_cut():
    assert chat(["--keep-old-turns"], QUESTIONS[:8]) == ANSWERS[:7] + [
        "[the reply was cut short: the 128-token context is full]",
        "petit chat: the conversation (143 tokens) no longer fits the context (128 tokens, 127 for the prompt at "
        "most) (/reset starts over)"]


def test_a_reply_cut_by_the_context_says_so_and_one_cut_by_n_does_not():
    assert chat(["--ctx", "20"], ["count from 1 to 9"]) == [
        "1 2 3 4 5 6 7", "[the reply was cut short: the 20-token context is full]"]
    assert chat(["-n", "4"], ["count from 1 to 9"]) == ["1 2 3 4"]     # the limit asked for: nothing to report


def test_a_message_too_long_for_the_context_alone():
    assert chat([], ["word " * 200, QUESTIONS[0]]) == [
        "petit chat: the conversation (210 tokens) no longer fits the context (128 tokens, 127 for the prompt at "
        "most), even with only this message", "19"]


def test_help_system_and_unknown_commands():
    lines = ["/help", "/system", "/system answer briefly", "/system", "/sytem be brief", "/reset now",
             QUESTIONS[0], "//reset", "/exit", QUESTIONS[1]]
    assert chat(["--system", "be brief"], lines) == [
        "commands:",
        "  /help          this list",
        "  /reset         start the conversation over (the system prompt stays)",
        "  /system        show the system prompt",
        "  /system TEXT   set the system prompt and start over",
        "  /exit, /quit   leave (Ctrl+D too)",
        '  //TEXT         send "/TEXT" to the model (a message that starts with a slash)',
        "Ctrl+C stops the reply in progress.",
        "(system prompt: be brief)",
        "(conversation reset)",
        "(system prompt: answer briefly)",
        "petit chat: unknown command /sytem (/help lists the commands; //TEXT sends a message that starts with a "
        "slash)",
        "petit chat: /reset takes no text (/help lists the commands)",
        "19",
        _reply_to("/reset", after=[QUESTIONS[0], "19"], system="answer briefly")]      # "//reset" sent "/reset"


def _reply_to(text, after, system):
    import petit
    from petit.assets import default_model_path
    from petit.generation import Params, Session
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": after[0]}, {"role": "assistant", "content": after[1]},
        {"role": "user", "content": text}]
    return "".join(step.text for step in Session(petit.load(default_model_path())).reply(messages, Params()))


def test_system_in_raw_mode(tmp_path):
    import models
    models.write_model(tmp_path / "m.petit")                 # no chat template: raw mode
    assert chat([str(tmp_path / "m.petit")], ["/system", "/system be brief"]) == [
        "(raw mode: no system prompt; --format picks a chat format)",
        "petit chat: raw mode has no system prompt (--format picks a chat format)"]


# --- a terminal: readline's line editing and the history file ----------------------------------------------------

def _type_on_a_terminal(keys, data_dir):
    """Run `petit chat` on a pseudo-terminal and type each of `keys` once the prompt shows; -> what the terminal
    showed. Never hangs: every wait is bounded."""
    pty = pytest.importorskip("pty")
    pytest.importorskip("readline")
    master, slave = pty.openpty()
    p = subprocess.Popen([*PETIT, "chat", "-t", "0"], stdin=slave, stdout=slave, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, PETIT_DATA_DIR=str(data_dir),
                                  TERM=os.environ.get("TERM") or "xterm"))   # a terminal always names its kind
    os.close(slave)
    shown = b""

    def read_until(done):
        nonlocal shown
        deadline = time.monotonic() + 60
        while not done() and time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                try:
                    shown += os.read(master, 4096)
                except OSError:              # the child closed the terminal
                    return
    try:
        read_until(lambda: b"> " in shown)
        for key in keys:
            prompts = shown.count(b"> ")
            os.write(master, key)
            read_until(lambda: shown.count(b"> ") > prompts or p.poll() is not None)
        assert p.wait(timeout=60) == 0
        read_until(lambda: False if select.select([master], [], [], 0.5)[0] else True)
    finally:
        p.kill()
        os.close(master)
    return shown.decode()


def test_line_editing_and_history_across_runs(tmp_path):
    # Ctrl+A goes to the start of the line (readline; a plain terminal would send the character itself)
    shown = _type_on_a_terminal([b"12 plus 7?\x01what is \r", b"\x04"], tmp_path)
    assert "\r\n19\r\n> " in shown
    readline = pytest.importorskip("readline")
    if "libedit" not in (readline.__doc__ or ""):         # GNU readline's format: one line per entry (libedit escapes)
        assert (tmp_path / "chat_history").read_text().splitlines() == ["what is 12 plus 7?"]
    # the next run starts with that history: Up brings the line back
    shown = _type_on_a_terminal([b"\x1b[A\r", b"\x04"], tmp_path)
    assert shown.startswith("> what is 12 plus 7?\r\n19\r\n> ")


def test_chat_forgets_old_turns_by_default_and_serve_refuses_by_default():
    # an API client owns its conversation: serve answers a too-long one with context_length_exceeded, as OpenAI does
    from petit.cli.commands import build_parser
    parser = build_parser()
    assert [parser.parse_args(argv).drop_old_turns for argv in (["chat"], ["chat", "--keep-old-turns"],
            ["chat", "--drop-old-turns"], ["serve"], ["serve", "--drop-old-turns"])] == [True, False, True, False, True]
