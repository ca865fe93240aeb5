"""`petit serve` as a child QProcess: its output, line by line; the URL once it listens; stop = terminate (the server
ends the reply in progress, answers the waiting requests 503 and exits) and, if it has not exited within
KILL_AFTER_MS, kill. Nothing here blocks the GUI thread except shutdown(), which the window calls as it closes.
The running server's pid and port are recorded in the data folder (leftover.py) until it ends."""
import os
import re

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment, QTimer, Signal

from app.server import leftover
from app.server.command import environment, program, serve_args

KILL_AFTER_MS = 5000
LISTENING = re.compile(r"listening on (\S+/v1)")
ERROR = re.compile(r"^petit serve: (?:internal )?error: (.*)$")


class ServerProcess(QObject):
    state_changed = Signal(str)          # "starting", "running", "stopping", "stopped"
    line_received = Signal(str)          # a line of the server's output (stderr and stdout)
    listening = Signal(str)              # the base URL (…/v1)
    exited = Signal(str)                 # why it ended, for a person

    def __init__(self, parent=None):
        super().__init__(parent)
        self.state = "stopped"
        self.url: str | None = None
        self.model: str | None = None
        self.error: str | None = None
        self._buffer = b""
        self._stopping = False
        self._host, self._pid = "", None
        self.process: QProcess | None = None
        self._kill_timer = QTimer(self, singleShot=True, interval=KILL_AFTER_MS)
        self._kill_timer.timeout.connect(self._kill)

    @property
    def running(self) -> bool:
        return self.state in ("starting", "running", "stopping")

    def start(self, model: str, host: str, port: int, api_key: str | None = None, options: dict | None = None,
              allowed_hosts=()):
        if self.running:
            raise RuntimeError("the server is already running")
        exe, args = program(serve_args(model, host, port, options, allowed_hosts))
        env = QProcessEnvironment()
        for key, value in environment(dict(os.environ), api_key).items():
            env.insert(key, value)
        p = QProcess(self)
        p.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        p.setProcessEnvironment(env)
        p.readyReadStandardOutput.connect(self._read)
        p.finished.connect(self._on_finished)
        p.errorOccurred.connect(self._on_error)
        p.started.connect(lambda: self._record(port))
        self._host = host
        self.process, self.model, self.url, self.error, self._stopping = p, model, None, None, False
        self._buffer = b""
        self._set_state("starting")
        p.start(exe, args)

    def stop(self) -> None:
        """Ask the server to exit; it is killed if it has not within KILL_AFTER_MS. Returns at once."""
        if self.process is None or self.state == "stopped":
            return
        self._stopping = True
        self._set_state("stopping")
        self.process.terminate()
        self._kill_timer.start()

    def shutdown(self, timeout_ms: int = KILL_AFTER_MS) -> None:
        """Stop the server and wait for the process to end (killing it if it must)."""
        p = self.process
        if p is None:
            return
        if p.state() != QProcess.ProcessState.NotRunning:
            self._stopping = True
            p.terminate()
            if not p.waitForFinished(timeout_ms):
                p.kill()
                p.waitForFinished(2000)
        self._kill_timer.stop()
        self._finish("stopped")

    # the process
    def _read(self) -> None:
        p = self.process
        if p is None:
            return
        self._buffer += bytes(p.readAllStandardOutput())
        *lines, self._buffer = self._buffer.split(b"\n")
        for raw in lines:
            self._line(raw.decode("utf-8", errors="replace").rstrip("\r"))

    def _line(self, line: str) -> None:
        self.line_received.emit(line)
        m = ERROR.match(line)
        if m:
            self.error = m.group(1)
        m = LISTENING.search(line)
        if m and self.state == "starting":
            self.url = m.group(1)
            port = re.search(r":(\d+)/v1$", self.url)
            if port:
                self._record(int(port.group(1)))
            self._set_state("running")
            self.listening.emit(self.url)

    def _on_finished(self, code: int, status) -> None:
        if self.process is None:
            return
        self._read()
        if self._buffer:
            self._line(self._buffer.decode("utf-8", errors="replace"))
            self._buffer = b""
        self._kill_timer.stop()
        if self._stopping:
            why = "stopped"
        elif status == QProcess.ExitStatus.CrashExit:
            why = "the server crashed"
        else:
            why = f"the server exited (code {code})" + (f": {self.error}" if self.error else "")
        self._finish(why)

    def _on_error(self, error) -> None:
        if error == QProcess.ProcessError.FailedToStart and self.process is not None:
            self._finish(f"the server could not start: {self.process.errorString()}")

    def _kill(self) -> None:
        if self.process is not None and self.process.state() != QProcess.ProcessState.NotRunning:
            self.process.kill()

    def _record(self, port: int) -> None:
        """Note the child's pid and port in the data folder, so a later run can end it if this one dies."""
        if self.process is None:
            return
        self._pid = self.process.processId() or None
        if self._pid:
            try:
                leftover.write_record(self._pid, self._host, port)
            except OSError:
                pass                             # a read-only data folder: only the recovery is lost

    def _finish(self, why: str) -> None:
        p, self.process = self.process, None
        if self._pid is not None:
            leftover.clear_record(self._pid)
            self._pid = None
        if p is not None:
            p.deleteLater()
        self.url = None
        if self.state != "stopped":
            self._set_state("stopped")
            self.exited.emit(why)

    def _set_state(self, state: str) -> None:
        self.state = state
        self.state_changed.emit(state)

