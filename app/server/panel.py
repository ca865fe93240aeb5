"""The Server tab: start and stop `petit serve` for the model loaded in the chat (with the chat's settings as every
request's defaults), on a host and port, with an optional API key; the base URL to copy, a curl example, and the
live log of requests. The server is a child process (ServerProcess): the window stays responsive whatever it does,
and closing the window stops it and waits for it. The host, port, key and names are read when the server starts,
so they cannot be edited while it runs. Listening on the network (any host but loopback) is confirmed first, in a
non-modal box that says who can then connect and under which names (the server's Host check)."""
import json
import os
import secrets

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QComboBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QMessageBox, QPlainTextEdit,
                               QPushButton, QSpinBox, QVBoxLayout, QWidget)

from app.server import leftover
from app.server.command import default_host_names, display_url, is_loopback
from app.server.process import ServerProcess

DEFAULT_PORT = 8080
LOG_LINES = 2000
STATES = {"stopped": "Stopped.", "starting": "Starting: loading the model…", "stopping": "Stopping…"}
KEY_NOTE = "The server checks the key it was started with: stop it to change the key."


class ServerPanel(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.model: str | None = None
        self.options: dict = {}
        self.server = ServerProcess(self)
        self.server.state_changed.connect(self._on_state)
        self.server.line_received.connect(self._log)
        self.server.exited.connect(self._on_exited)
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.model_label = QLabel("No model is loaded.")
        self.model_label.setWordWrap(True)
        form.addRow("Model:", self.model_label)
        self.host = QComboBox(editable=True)
        self.host.addItems(["127.0.0.1", "0.0.0.0"])
        self.host.setToolTip("127.0.0.1: only this computer can connect. 0.0.0.0: other computers on the network "
                             "can too (set an API key).")
        self.host.setAccessibleName("Host")
        self.host.currentTextChanged.connect(lambda _: self._sync())
        form.addRow("Host:", self.host)
        self.allowed_hosts = QLineEdit(", ".join(default_host_names()))
        self.allowed_hosts.setAccessibleName("Also answer as")
        self.allowed_hosts.setToolTip("Names other computers may use for this one in their requests, separated by "
                                      "commas (IP addresses always work). Requests naming anything else are refused, "
                                      "against DNS rebinding.")
        self.allowed_label = QLabel("Also answer as:")
        form.addRow(self.allowed_label, self.allowed_hosts)
        self.port = QSpinBox(minimum=0, maximum=65535, value=DEFAULT_PORT, specialValueText="any free port")
        self.port.setAccessibleName("Port")
        form.addRow("Port:", self.port)
        row = QHBoxLayout()
        self.api_key = QLineEdit(placeholderText="none: any client on the host may connect")
        self.api_key.setAccessibleName("API key")
        self.generate_button = QPushButton("Generate")
        self.generate_button.setToolTip("Make up a random key")
        self.generate_button.clicked.connect(lambda: self.api_key.setText(secrets.token_urlsafe(24)))
        row.addWidget(self.api_key, 1)
        row.addWidget(self.generate_button)
        form.addRow("API key:", row)
        self.key_note = QLabel(KEY_NOTE)
        self.key_note.setWordWrap(True)
        form.addRow("", self.key_note)
        self.confirm_dialog: QMessageBox | None = None
        layout.addLayout(form)
        row = QHBoxLayout()
        self.start_button = QPushButton("Start server")
        self.stop_button = QPushButton("Stop server")
        self.restart_button = QPushButton("Restart with the chat's model")
        self.start_button.clicked.connect(lambda: self.start())
        self.stop_button.clicked.connect(self.stop)
        self.restart_button.clicked.connect(self.restart)
        for b in (self.start_button, self.stop_button, self.restart_button):
            row.addWidget(b)
        self.status = QLabel(STATES["stopped"])
        self.status.setWordWrap(True)
        row.addWidget(self.status, 1)
        layout.addLayout(row)
        row = QHBoxLayout()
        row.addWidget(QLabel("Base URL:"))
        self.url_edit = QLineEdit(readOnly=True, placeholderText="shown once the server listens")
        self.url_edit.setAccessibleName("Base URL")
        self.copy_button = QPushButton("Copy")
        self.copy_button.clicked.connect(self.copy_url)
        row.addWidget(self.url_edit, 1)
        row.addWidget(self.copy_button)
        layout.addLayout(row)
        self.example = QLabel()
        self.example.setWordWrap(True)
        self.example.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.example)
        row = QHBoxLayout()
        row.addWidget(QLabel("Log:"))
        row.addStretch(1)
        clear = QPushButton("Clear")
        row.addWidget(clear)
        layout.addLayout(row)
        self.log = QPlainTextEdit(readOnly=True)
        self.log.setMaximumBlockCount(LOG_LINES)
        self.log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.log.setAccessibleName("Server log")
        clear.clicked.connect(self.log.clear)
        layout.addWidget(self.log, 1)
        self._sync()

    # the shell's contract
    def set_model(self, path: str, options: dict) -> None:
        """The chat's model (and its resolved settings) changed: the next start serves it."""
        self.model, self.options = path, dict(options)
        self._sync()

    def shutdown(self) -> None:
        self.server.shutdown()

    # actions
    def host_names(self) -> list[str]:
        return [n.strip() for n in self.allowed_hosts.text().replace(" ", ",").split(",") if n.strip()]

    def start(self, confirmed: bool = False) -> None:
        if self.model is None or self.server.running:
            return
        host = self.host.currentText().strip() or "127.0.0.1"
        if not is_loopback(host) and not confirmed:
            self._confirm_network(host)
            return
        ended = leftover.end_leftover()          # a server a killed run of the app left holding the port
        if ended:
            self._log(f"— {ended}")
        problem = leftover.port_problem(host, self.port.value())
        if problem:
            self._log(f"— {problem}")
            self.status.setText(problem)
            return
        self._log(f"— starting petit serve {self.model} on {host}:{self.port.value()}")
        names = [] if is_loopback(host) else self.host_names()
        self.server.start(self.model, host, self.port.value(), self.api_key.text().strip() or None, self.options,
                          names)

    def _confirm_network(self, host: str) -> None:
        """Ask before listening on the network: non-modal, so the window stays usable; Start again re-asks."""
        port = self.port.value()
        who = f"Every computer that can reach this one{f' on port {port}' if port else ''} can then use the model"
        who += ", with the API key." if self.api_key.text().strip() else (
            " — with no API key, anyone at all: set one first if the network is not yours alone.")
        names = self.host_names()
        how = ("Clients must name this computer by its IP address"
               + (f" or as {', '.join(names)}" if names else "") + " (\"Also answer as\" sets the names).")
        if self.confirm_dialog is not None:
            self.confirm_dialog.close()
        box = QMessageBox(QMessageBox.Icon.Question, "Listen on the network?", f"Listen on {host}? {who}",
                          QMessageBox.StandardButton.Cancel, self)
        box.setInformativeText(how)
        listen = box.addButton("Listen on the network", QMessageBox.ButtonRole.AcceptRole)
        listen.clicked.connect(lambda: self.start(confirmed=True))
        box.setWindowModality(Qt.WindowModality.NonModal)
        box.show()
        self.confirm_dialog = box

    def stop(self) -> None:
        self.server.stop()

    def restart(self) -> None:
        """Stop the server and start it again with the chat's current model, once the old one has exited."""
        if not self.server.running:
            self.start()
            return
        self.server.exited.connect(self._start_once_stopped)
        self.server.stop()

    def _start_once_stopped(self, _why: str) -> None:
        self.server.exited.disconnect(self._start_once_stopped)
        self.start(confirmed=True)             # same host as the server just stopped: confirmed when it started

    def copy_url(self) -> None:
        if self.url_edit.text():
            QGuiApplication.clipboard().setText(self.url_edit.text())
            self.status.setText(self.status.text().split(" (copied")[0] + " (copied the base URL)")

    # what the server does
    def _on_state(self, state: str) -> None:
        if state == "running":
            url = display_url(self.server.url)
            self.url_edit.setText(url)
            self.status.setText(f"Running: {os.path.basename(self.server.model)} at {url}")
            self.example.setText(self._example(url))
        else:
            self.status.setText(STATES[state])
            if state == "stopped":
                self.url_edit.clear()
                self.example.clear()
        self._sync()

    def _on_exited(self, why: str) -> None:
        self._log(f"— {why}")
        if why != "stopped":
            self.status.setText(why[0].upper() + why[1:] + ".")

    def _log(self, line: str) -> None:
        self.log.appendPlainText(line)

    def _example(self, url: str) -> str:
        body = json.dumps({"messages": [{"role": "user", "content": "what is 12 plus 7?"}]})
        key = self.api_key.text().strip()
        auth = f" -H 'Authorization: Bearer {key}'" if key else ""
        return f"Try: curl {url}/chat/completions -H 'Content-Type: application/json'{auth} -d '{body}'"

    def _sync(self) -> None:
        running = self.server.running
        serving_other = running and self.model is not None and self.server.model != self.model
        name = os.path.basename(self.model) if self.model else None
        if name is None:
            self.model_label.setText("No model is loaded.")
        elif serving_other:
            self.model_label.setText(f"serving {os.path.basename(self.server.model)}; the chat now uses {name}: "
                                     f"restart to serve it")
        else:
            self.model_label.setText(f"{name} (the chat's model, with its settings)")
        self.start_button.setEnabled(not running and self.model is not None)
        self.stop_button.setEnabled(running and self.server.state != "stopping")
        self.restart_button.setVisible(serving_other)
        for w in (self.host, self.port, self.api_key, self.generate_button, self.allowed_hosts):
            w.setEnabled(not running)          # read when the server starts: changing them now would do nothing
        self.key_note.setVisible(running)
        network = not is_loopback(self.host.currentText().strip() or "127.0.0.1")
        self.allowed_label.setVisible(network)
        self.allowed_hosts.setVisible(network)
        self.copy_button.setEnabled(bool(self.url_edit.text()))
