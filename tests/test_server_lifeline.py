"""`petit serve` started by another program ends when that program is killed with kill -9 (it must not keep the
port): through the parent-death signal (Linux) and through the stdin pipe the parent holds (every system), each on
its own, with a real parent process killed for real. Without PETIT_LIFELINE nothing changes (a server started from
a terminal keeps running on its own)."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from app.server.leftover import alive  # noqa: E402  (Qt-free: a zombie counts as ended)
from petit.server.lifeline import arm  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="kill -9 of a real parent process is POSIX")
TIMEOUT_S = 60

# the parent: starts `petit serve` (its log in a file, never in a pipe the parent holds: a write to a dead
# reader's pipe would end the child for another reason), prints the child's pid, then waits to be killed
PARENT = r"""
import os, subprocess, sys
log = open(sys.argv[2], "wb")
env = dict(os.environ, PETIT_PARENT_PID=str(os.getpid()))
if sys.argv[1]:
    env["PETIT_LIFELINE"] = sys.argv[1]
else:
    env.pop("PETIT_LIFELINE", None)
child = subprocess.Popen([sys.executable, "-m", "petit.cli", "serve", "--port=0", "--ctx=64"], stdin=subprocess.PIPE,
                         stdout=log, stderr=log, env=env)
print(child.pid, flush=True)
sys.stdin.read()
"""


def wait_for(condition, what: str) -> None:
    end = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def assert_port_free(log: str) -> None:
    """The port the server listened on can be listened on again (what the relaunched app needs)."""
    port = int(re.search(r"listening on http://127.0.0.1:(\d+)/v1", open(log).read()).group(1))
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)      # as uvicorn does
        s.bind(("127.0.0.1", port))
        s.listen()


def kill_the_parent(tmp_path, lifeline: str) -> tuple[int, str]:
    """Start a parent that starts `petit serve`; once the server listens, kill -9 the parent. -> (server pid, log)"""
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in ("PETIT_LIFELINE", "PETIT_PARENT_PID")}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, lifeline, str(log)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = int(parent.stdout.readline())
    wait_for(lambda: b"listening on" in log.read_bytes() or not alive(child), "the server to listen")
    assert alive(child), log.read_text()
    parent.kill()                                    # SIGKILL: no handler, no cleanup in the parent
    parent.wait()
    return child, str(log)


@pytest.mark.parametrize("mechanism", [
    pytest.param("parent", marks=pytest.mark.skipif(not sys.platform.startswith("linux"),
                                                    reason="the parent-death signal is Linux's")),
    "stdin",                                         # the pipe the child watches: every system
])
def test_the_server_ends_when_its_parent_is_killed(tmp_path, mechanism):
    child, log = kill_the_parent(tmp_path, mechanism)
    try:
        wait_for(lambda: not alive(child), "the orphaned server to end")
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
    assert_port_free(log)


def test_without_the_variable_nothing_is_armed():
    assert arm({}) == [] and arm({"PETIT_LIFELINE": ""}) == []
