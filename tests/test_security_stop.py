"""Stop strings are capped in number and length (petit/stop.py): every generated token is checked against each of
them, so an unbounded list (50,000 were accepted) slows every token. The cap holds for every caller: the Python API,
the terminal chat and the server (whose 400 is checked with the other request errors in test_server_http.py)."""
import os
import subprocess
import sys

import pytest

import petit
from petit.generation.session import Params, Session
from petit.generation.stop import MAX_STOP_LENGTH, MAX_STOPS, StopStrings, check_stop_strings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSET = os.path.join(ROOT, "assets", "default-q8_0.petit")
TOO_MANY = [f"s{i}" for i in range(MAX_STOPS + 1)]


def test_the_limits_and_their_messages():
    assert (MAX_STOPS, MAX_STOP_LENGTH) == (64, 1000)
    with pytest.raises(ValueError) as e:
        StopStrings(TOO_MANY)
    assert str(e.value) == "65 stop strings given; at most 64 are supported"
    with pytest.raises(ValueError) as e:
        StopStrings(["ok", "", "x" * 1001])
    assert str(e.value) == "stop string 2 is 1001 characters long; at most 1000 are supported"
    with pytest.raises(ValueError) as e:
        check_stop_strings(["ok", 7])
    assert str(e.value) == "stop string 1 is a int, not a string"
    assert check_stop_strings(["", "a", ""] * 40) == ["a"] * 40  # empty strings stop nothing and do not count


def test_the_most_stop_strings_allowed_still_work():
    stops = [f"{i:02d}" + "y" * (MAX_STOP_LENGTH - 2) for i in range(MAX_STOPS)]
    s = StopStrings(stops)
    text = "hello 63" + "y" * 998 + " never shown"
    shown, hit = "", False
    for i in range(0, len(text), 7):          # arriving 7 characters at a time, as tokens do
        out, hit = s.push(text[i:i + 7])
        shown += out
        if hit:
            break
    assert (shown, hit, i) == ("hello ", True, 1001)


@pytest.fixture(scope="module")
def model():
    return petit.load(ASSET)


def test_the_python_api_refuses_too_many_stop_strings(model):
    session = Session(model)
    with pytest.raises(ValueError, match="^65 stop strings given; at most 64 are supported$"):
        list(session.reply([{"role": "user", "content": "hi"}], Params(max_tokens=4, stop=TOO_MANY)))


def test_the_terminal_chat_says_what_is_wrong_without_a_traceback():
    args = [a for s in TOO_MANY for a in ("--stop", s)]
    p = subprocess.run([sys.executable, "-m", "petit.cli", "chat", ASSET, *args], input="hi\n", cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert "65 stop strings given; at most 64 are supported" in p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
