"""The Server panel (app.server.ServerPanel): `petit serve` for the chat's model as a child process; a real HTTP
request to /v1/models (with and without the API key) appears in the live log; Stop ends the process; a server that
cannot start says why; closing the window's panel while it runs stops and waits for it. The command line it builds
is checked on its own."""
import os
import sys

import httpx
import pytest
import shiboken6
from PySide6.QtCore import QProcess

from app.server import ServerPanel
from app.server.command import display_url, environment, program, serve_args
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

    process = panel.server.process
    panel.stop_button.click()
    assert panel.server.state == "stopping"
    qtbot.waitUntil(lambda: panel.server.state == "stopped", timeout=TIMEOUT_MS)
    assert panel.url_edit.text() == "" and panel.start_button.isEnabled() and panel.status.text() == "Stopped."
    assert not running(process)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/models", timeout=2)


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
    from petit.cli import build_parser                     # every flag is one `petit serve` accepts
    parsed = build_parser().parse_args(["serve", *args])
    assert parsed.frequency_penalty == -0.5 and parsed.system == "Be brief." and parsed.ctx == 128
    exe, argv = program(args)
    assert exe == sys.executable and argv[:2] == ["-m", "app.server.runner"]
    env = environment({"PETIT_API_KEY": "inherited", "PYTHONPATH": "/x"}, None)
    assert "PETIT_API_KEY" not in env and env["PYTHONPATH"].endswith(os.pathsep + "/x")
    assert environment({}, "k")["PETIT_API_KEY"] == "k"
    assert display_url("http://0.0.0.0:8080/v1") == "http://127.0.0.1:8080/v1"
