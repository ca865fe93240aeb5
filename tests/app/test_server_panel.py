"""The Server panel (app.server.ServerPanel): `petit serve` for the chat's model as a child process; a real HTTP
request to /v1/models (with and without the API key) appears in the live log; Stop ends the process; a server that
cannot start says why; closing the window's panel while it runs stops and waits for it. The command line it builds
is checked on its own."""
import os
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest
import shiboken6
from PySide6.QtCore import QProcess

from app.server import ServerPanel, leftover
from app.server.command import default_host_names, display_url, environment, program, serve_args
from petit.assets import default_model_path

TIMEOUT_MS = 30000
OPTIONS = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.0,
           "frequency_penalty": -0.5, "presence_penalty": 0.0, "seed": None, "max_tokens": 16, "system": "Be brief.",
           "format": None, "n_ctx": 128, "kv_type": None, "weights": None, "drop_old_turns": True}


@pytest.fixture
def panel(qtbot):
    p = ServerPanel()
    qtbot.addWidget(p)
    p.show()
    yield p
    p.shutdown()
    assert p.server.process is None and p.server.state == "stopped", "the server process was left running"


def start(qtbot, panel, api_key=""):
    panel.set_model(default_model_path(), OPTIONS)
    panel.port.setValue(0)                              # any free port
    panel.api_key.setText(api_key)
    panel.start_button.click()
    assert panel.server.state == "starting" and not panel.start_button.isEnabled()
    qtbot.waitUntil(lambda: panel.server.state != "starting", timeout=TIMEOUT_MS)
    assert panel.server.state == "running", panel.log.toPlainText()
    return panel.url_edit.text()


def test_start_serve_a_request_and_stop(qtbot, panel):
    assert not panel.start_button.isEnabled()            # no model yet
    url = start(qtbot, panel, api_key="s3cret")
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1") and "default-q8_0" in panel.status.text()
    assert "Bearer s3cret" in panel.example.text() and panel.copy_button.isEnabled()
    panel.copy_url()
    from PySide6.QtGui import QGuiApplication
    assert QGuiApplication.clipboard().text() == url

    assert httpx.get(f"{url}/models", timeout=10).status_code == 401
    r = httpx.get(f"{url}/models", headers={"Authorization": "Bearer s3cret"}, timeout=10)
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "default-q8_0"
    qtbot.waitUntil(lambda: "GET /v1/models 200" in panel.log.toPlainText(), timeout=TIMEOUT_MS)
    assert "GET /v1/models 401" in panel.log.toPlainText() and "listening on" in panel.log.toPlainText()
    assert re.search(r"^petit serve: 127\.0\.0\.1 GET /v1/models 200 \d+ ms$", panel.log.toPlainText(), re.M)

    process = panel.server.process
    panel.stop_button.click()
    assert panel.server.state == "stopping"
    qtbot.waitUntil(lambda: panel.server.state == "stopped", timeout=TIMEOUT_MS)
    assert panel.url_edit.text() == "" and panel.start_button.isEnabled() and panel.status.text() == "Stopped."
    assert not running(process)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/models", timeout=2)


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in bundle is a shell script")
def test_the_bundled_app_logs_every_request_too(qtbot, panel, tmp_path, monkeypatch):
    """In the bundle the Server tab runs the bundle's own `serve` command (packaging/petit_entry.py -> petit.cli):
    its log shows each request as the source tree's does. The bundle is stood in for by a script running
    petit_entry.py, as sys.executable of a frozen Python."""
    bundle = tmp_path / "Petit"
    bundle.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{ROOT}/packaging/petit_entry.py" "$@"\n')
    bundle.chmod(0o755)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", str(bundle))
    url = start(qtbot, panel)
    assert panel.server.process.program() == str(bundle) and panel.server.process.arguments()[0] == "serve"
    assert httpx.get(f"{url}/models", timeout=10).status_code == 200
    assert httpx.get(f"{url}/nowhere", timeout=10).status_code == 404
    qtbot.waitUntil(lambda: "GET /v1/nowhere 404" in panel.log.toPlainText(), timeout=TIMEOUT_MS)
    assert re.search(r"^petit serve: 127\.0\.0\.1 GET /v1/models 200 \d+ ms$", panel.log.toPlainText(), re.M)


def test_a_new_model_while_running_offers_a_restart_and_closing_stops_the_server(qtbot, panel, tmp_path):
    url = start(qtbot, panel)
    other = os.path.join(os.path.dirname(default_model_path()), "default-q4_0.petit")
    panel.set_model(other, OPTIONS)
    assert not panel.restart_button.isHidden() and "restart to serve it" in panel.model_label.text()
    panel.restart_button.click()
    qtbot.waitUntil(lambda: panel.server.state == "running" and panel.server.model == other, timeout=TIMEOUT_MS)
    url = panel.url_edit.text()
    assert httpx.get(f"{url}/models", timeout=10).json()["data"][0]["id"] == "default-q4_0"
    assert panel.restart_button.isHidden()
    process = panel.server.process
    panel.shutdown()                                       # what the window does as it closes: stop and wait
    assert panel.server.state == "stopped" and not running(process)


def running(process) -> bool:
    return shiboken6.isValid(process) and process.state() != QProcess.ProcessState.NotRunning


def test_a_server_that_cannot_start_says_why(qtbot, panel, tmp_path):
    panel.set_model(str(tmp_path / "missing.petit"), {})
    panel.start()
    qtbot.waitUntil(lambda: panel.server.state == "stopped", timeout=TIMEOUT_MS)
    assert "missing.petit" in panel.status.text() and "exited" in panel.status.text()
    assert panel.start_button.isEnabled()


def test_the_command_line():
    args = serve_args("m.petit", "0.0.0.0", 9000, OPTIONS)
    assert args[:3] == ["m.petit", "--host=0.0.0.0", "--port=9000"]
    assert {"--temperature=0.0", "--top-k=0", "--frequency-penalty=-0.5", "--max-tokens=16", "--system=Be brief.",
            "--ctx=128", "--drop-old-turns", "--stats"} <= set(args)
    assert not any(a.startswith(("--seed", "--format", "--kv", "--weights")) for a in args)   # None: the defaults
    from petit.cli.commands import build_parser            # every flag is one `petit serve` accepts
    parsed = build_parser().parse_args(["serve", *args])
    assert parsed.frequency_penalty == -0.5 and parsed.system == "Be brief." and parsed.ctx == 128
    exe, argv = program(args)
    assert exe == sys.executable and argv[:3] == ["-m", "petit.cli", "serve"] and "--log-requests" in args
    env = environment({"PETIT_API_KEY": "inherited", "PYTHONPATH": "/x"}, None)
    assert "PETIT_API_KEY" not in env and env["PYTHONPATH"].endswith(os.pathsep + "/x")
    assert environment({}, "k")["PETIT_API_KEY"] == "k"
    assert display_url("http://0.0.0.0:8080/v1") == "http://127.0.0.1:8080/v1"
    assert not any(a.startswith(("--lookup", "--draft")) for a in args)
    assert build_parser().parse_args(["serve", *serve_args("m", "h", 1, {"speculation": "lookup"})]).lookup
    spec = serve_args("m", "h", 1, {"speculation": "model", "draft_model": "d.petit"})
    assert build_parser().parse_args(["serve", *spec]).draft == "d.petit"
    assert "--draft" not in " ".join(serve_args("m", "h", 1, {"speculation": "model", "draft_model": None}))
    kept = build_parser().parse_args(["serve", *serve_args("m", "h", 1, {"drop_old_turns": True, "n_keep": 24})])
    assert kept.drop_old_turns and kept.n_keep == 24
    assert "--n-keep" not in " ".join(serve_args("m", "h", 1, {"drop_old_turns": False, "n_keep": 24}))
    named = serve_args("m.petit", "0.0.0.0", 9000, {}, ["box", "box.local"])
    assert build_parser().parse_args(["serve", *named]).allowed_host == ["box", "box.local"]
    assert environment({}, None)["PETIT_LIFELINE"] == "parent,stdin"


# a window's server that outlives the app, kill -9 of the app, a port taken by another program
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
APP = r"""
import sys
sys.path.insert(0, sys.argv[1])
from PySide6.QtCore import QCoreApplication
from app.server.process import ServerProcess
app = QCoreApplication([])
server = ServerProcess()
server.listening.connect(lambda url: print(server.process.processId(), url, flush=True))
server.start(sys.argv[2], "127.0.0.1", 0)
app.exec()
"""


def alive(pid: int) -> bool:
    return leftover.alive(pid)


def wait_for(condition, what: str, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.05)


def port_of(url: str) -> int:
    return int(re.search(r":(\d+)/v1$", url).group(1))


@pytest.mark.skipif(sys.platform == "win32", reason="kill -9 is POSIX")
def test_killing_the_app_ends_its_server_and_the_next_start_gets_the_port(qtbot, panel, data_dir):
    """kill -9 of the app: its `petit serve` child ends too (it must not keep the port), and the relaunched app's
    server starts on the same port."""
    app = subprocess.Popen([sys.executable, "-c", APP, ROOT, default_model_path()], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    try:
        pid, url = app.stdout.readline().split()
        pid, port = int(pid), port_of(url)
        assert leftover.read_record()["pid"] == pid and leftover.read_record()["port"] == port
        app.kill()                                            # SIGKILL: the app has no chance to stop its server
        app.wait()
        wait_for(lambda: not alive(pid), "the server of the killed app to end")
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    panel.set_model(default_model_path(), OPTIONS)
    panel.port.setValue(port)
    panel.start()
    qtbot.waitUntil(lambda: panel.server.state != "starting", timeout=TIMEOUT_MS)
    assert panel.server.state == "running", panel.log.toPlainText()
    assert panel.url_edit.text() == f"http://127.0.0.1:{port}/v1"
    assert leftover.read_record()["pid"] == panel.server.process.processId()
    panel.shutdown()
    assert leftover.read_record() is None                     # a server that ended is no longer recorded


@pytest.mark.skipif(sys.platform == "win32", reason="needs a way to tell a process's command line")
def test_a_server_left_behind_by_an_earlier_run_is_ended_and_its_port_reused(qtbot, panel, tmp_path):
    """A `petit serve` of ours that outlived its app (no lifeline) still holds the port: Start ends it (the record
    in the data folder names it) and serves on that port."""
    log = open(tmp_path / "orphan.log", "wb")
    env = {k: v for k, v in os.environ.items() if k not in ("PETIT_LIFELINE", "PETIT_PARENT_PID")}
    orphan = subprocess.Popen([sys.executable, "-m", "petit.cli", "serve", default_model_path(), "--port=0"],
                              stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=ROOT, env=env)
    try:
        wait_for(lambda: b"listening on" in (tmp_path / "orphan.log").read_bytes(), "the orphan to listen")
        port = int(re.search(rb"127\.0\.0\.1:(\d+)/v1", (tmp_path / "orphan.log").read_bytes()).group(1))
        leftover.write_record(orphan.pid, "127.0.0.1", port)
        panel.set_model(default_model_path(), OPTIONS)
        panel.port.setValue(port)
        panel.start()
        assert orphan.wait(timeout=10) is not None            # ended (its port released) before the new server
        assert (f"— ended the server (pid {orphan.pid}, port {port}) an earlier run of Petit left behind"
                in panel.log.toPlainText())
        qtbot.waitUntil(lambda: panel.server.state != "starting", timeout=TIMEOUT_MS)
        assert panel.server.state == "running" and panel.url_edit.text() == f"http://127.0.0.1:{port}/v1"
    finally:
        if orphan.poll() is None:
            orphan.kill()
        orphan.wait()
        log.close()


def test_a_port_held_by_another_program_is_named_and_nothing_starts(qtbot, panel):
    """A port another program holds: the panel says which (and never ends a process that is not its server)."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        leftover.write_record(other.pid, "127.0.0.1", port)      # a record naming a process that is not a server
        panel.set_model(default_model_path(), OPTIONS)
        panel.port.setValue(port)
        panel.start()
        assert panel.server.state == "stopped" and panel.server.process is None
        if sys.platform.startswith("linux"):
            name = open(f"/proc/{os.getpid()}/comm").read().strip()
            expected = f"Port {port} is in use by {name} (pid {os.getpid()}): stop that program or choose another port."
        else:
            expected = f"Port {port} is in use by another program: choose another port (0 picks any free one)."
        assert panel.status.text() == expected and expected in panel.log.toPlainText()
        assert panel.start_button.isEnabled() and other.poll() is None     # the other program was left alone
    finally:
        holder.close()
        other.kill()
        other.wait()



def test_the_api_key_cannot_change_under_a_running_server(qtbot, panel):
    """The server reads the key when it starts: while it runs, neither the field nor Generate can change it, and
    the panel says so."""
    assert panel.key_note.isHidden()
    start(qtbot, panel, api_key="first")
    assert not panel.api_key.isEnabled() and not panel.generate_button.isEnabled()
    assert not panel.key_note.isHidden() and panel.key_note.text() == (
        "The server checks the key it was started with: stop it to change the key.")
    url = panel.url_edit.text()
    assert httpx.get(f"{url}/models", headers={"Authorization": "Bearer first"}, timeout=10).status_code == 200
    panel.stop()
    qtbot.waitUntil(lambda: panel.server.state == "stopped", timeout=TIMEOUT_MS)
    assert panel.api_key.isEnabled() and panel.generate_button.isEnabled() and panel.key_note.isHidden()
    panel.generate_button.click()
    assert len(panel.api_key.text()) >= 32 and panel.api_key.text() != "first"


def test_listening_on_the_network_is_confirmed_and_answers_to_the_allowed_names(qtbot, panel):
    """0.0.0.0: Start asks first (non-modal, saying who can connect and under which names); Cancel starts
    nothing; confirming starts a server that accepts requests naming this computer as listed, and no other name."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox
    panel.set_model(default_model_path(), OPTIONS)
    panel.port.setValue(0)
    assert panel.allowed_hosts.isHidden()                       # 127.0.0.1: only this computer, no names needed
    panel.host.setCurrentText("0.0.0.0")
    assert not panel.allowed_hosts.isHidden() and panel.allowed_hosts.text() == ", ".join(default_host_names())
    panel.allowed_hosts.setText("petit-box, petit-box.local")
    panel.start_button.click()
    box = panel.confirm_dialog
    assert panel.server.state == "stopped" and box.isVisible()
    assert box.windowModality() == Qt.WindowModality.NonModal
    assert box.text() == ("Listen on 0.0.0.0? Every computer that can reach this one can then use the model — with "
                          "no API key, anyone at all: set one first if the network is not yours alone.")
    assert box.informativeText() == ("Clients must name this computer by its IP address or as petit-box, "
                                     "petit-box.local (\"Also answer as\" sets the names).")
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert panel.server.state == "stopped" and panel.server.process is None

    panel.api_key.setText("k")
    panel.start_button.click()
    box = panel.confirm_dialog
    assert box.text().endswith("can then use the model, with the API key.")
    [listen] = [b for b in box.buttons() if b.text() == "Listen on the network"]
    listen.click()
    qtbot.waitUntil(lambda: panel.server.state != "starting", timeout=TIMEOUT_MS)
    assert panel.server.state == "running", panel.log.toPlainText()
    assert not panel.allowed_hosts.isEnabled()
    url = panel.url_edit.text()
    port = port_of(url)
    auth = {"Authorization": "Bearer k"}

    def status(host=None):
        headers = dict(auth, **({"Host": f"{host}:{port}"} if host else {}))
        return httpx.get(f"{url}/models", headers=headers, timeout=10).status_code
    assert status("petit-box.local") == 200 and status("evil.example") == 400
    assert status() == 200                                         # by IP address
