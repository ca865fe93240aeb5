"""One app per data folder. Two instances on one folder would each write the same database, chats and settings
behind the other's back, so the second one does not open a window: it asks the first to come to the front (and to
open the model it was given), then exits. If the first does not answer, it says which process holds the folder.

The folder is held with a QLockFile (petit.lock): a lock left by an instance that was killed (its pid no longer
runs) is stale and taken over, so a kill -9 never blocks the next start. The first instance listens on a TCP port
of 127.0.0.1 that it writes, with a random token, in instance.json beside the lock; Python's socket and a
QSocketNotifier serve it on the GUI thread (the bundled app leaves QtNetwork out)."""
import json
import os
import secrets
import socket

from PySide6.QtCore import QLockFile, QObject, QSocketNotifier, Signal

LOCK_NAME = "petit.lock"
ADDRESS_NAME = "instance.json"
ANSWER_S = 3.0
MAX_MESSAGE = 65536


class SingleInstance(QObject):
    activated = Signal(object)           # another start asked this one to come forward: the model it was given

    def __init__(self, folder: str, parent=None):
        super().__init__(parent)
        self.folder = folder
        self.lock = QLockFile(os.path.join(folder, LOCK_NAME))
        self.address_path = os.path.join(folder, ADDRESS_NAME)
        self._socket: socket.socket | None = None
        self._notifier: QSocketNotifier | None = None
        self._token = ""

    def acquire(self) -> bool:
        """Hold the folder and listen for later starts. False when another live instance holds it. A lock that
        cannot be written at all (a read-only folder) is not in the way: the app then runs without it."""
        if not self.lock.tryLock(0):
            return self.lock.error() != QLockFile.LockError.LockFailedError
        try:
            self._listen()
        except OSError:
            self._close_socket()         # no way to be asked forward: the lock still keeps others out
        return True

    def _listen(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket = s
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        s.setblocking(False)
        self._token = secrets.token_hex(16)
        tmp = f"{self.address_path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"port": s.getsockname()[1], "token": self._token, "pid": os.getpid()}, f)
        os.replace(tmp, self.address_path)
        self._notifier = QSocketNotifier(s.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._on_connection)

    def ask_running(self, model: str | None, timeout_s: float = ANSWER_S) -> bool:
        """Ask the instance holding the folder to come to the front (and open `model`). True once it answered."""
        try:
            with open(self.address_path, encoding="utf-8") as f:
                address = json.load(f)
            message = {"token": address["token"], "model": os.path.abspath(model) if model else None}
            with socket.create_connection(("127.0.0.1", int(address["port"])), timeout=timeout_s) as s:
                s.sendall(json.dumps(message).encode("utf-8") + b"\n")
                return s.makefile("rb").readline(16).startswith(b"ok")
        except (OSError, ValueError, KeyError, TypeError):
            return False

    def holder(self) -> str:
        """Who holds the folder, for a person: "process 1234 (python3) on host"."""
        info = self.lock.getLockInfo()         # PySide6: (pid, host name, app name), or False when unknown
        if not isinstance(info, tuple) or len(info) != 3 or not info[0]:
            return "another process"
        pid, host, app = info
        return f"process {pid}" + (f" ({app})" if app else "") + (f" on {host}" if host else "")

    def release(self) -> None:
        if self._socket is not None:
            self._close_socket()
            try:
                os.remove(self.address_path)
            except OSError:
                pass
        if self.lock.isLocked():
            self.lock.unlock()

    def _close_socket(self) -> None:
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
            self._notifier = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _on_connection(self, *_) -> None:
        if self._socket is None:
            return
        try:
            conn, _ = self._socket.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        with conn:
            try:
                conn.settimeout(1.0)             # the asking start writes at once: never a long wait here
                line = conn.makefile("rb").readline(MAX_MESSAGE)
                message = json.loads(line.decode("utf-8"))
            except (OSError, ValueError):
                return
            if not isinstance(message, dict) or not secrets.compare_digest(str(message.get("token")), self._token):
                return
            try:
                conn.sendall(b"ok\n")
            except OSError:
                pass
        model = message.get("model")
        self.activated.emit(model if isinstance(model, str) and model else None)
