"""One app per data folder. Two instances on one folder would each write the same database, chats and settings
behind the other's back, so the second one does not open a window: it asks the first (over a QLocalSocket named
after the folder) to come to the front, and to open the model it was given, then exits. If the first does not
answer, it says which process holds the folder and exits.

The folder is held with a QLockFile (petit.lock): a lock left by an instance that was killed (its pid no longer
runs) is stale and taken over, so a kill -9 never blocks the next start."""
import hashlib
import json
import os

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

LOCK_NAME = "petit.lock"
ANSWER_MS = 3000


def server_name(folder: str) -> str:
    """The local socket's name for a data folder (short: a socket path is limited to about 100 bytes)."""
    digest = hashlib.sha256(os.path.realpath(folder).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"petit-{digest}"


class SingleInstance(QObject):
    activated = Signal(object)           # another start asked this one to come forward: the model it was given

    def __init__(self, folder: str, parent=None):
        super().__init__(parent)
        self.folder = folder
        self.name = server_name(folder)
        self.lock = QLockFile(os.path.join(folder, LOCK_NAME))
        self.server: QLocalServer | None = None

    def acquire(self) -> bool:
        """Hold the folder and listen for later starts. False when another live instance holds it. A lock that
        cannot be written at all (a read-only folder) is not in the way: the app then runs without it."""
        if not self.lock.tryLock(0):
            if self.lock.error() == QLockFile.LockError.LockFailedError:
                return False
            return True
        QLocalServer.removeServer(self.name)     # the socket file a killed instance left behind
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._on_connection)
        self.server.listen(self.name)
        return True

    def ask_running(self, model: str | None, timeout_ms: int = ANSWER_MS) -> bool:
        """Ask the instance holding the folder to come to the front (and open `model`). True once it answered."""
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if not socket.waitForConnected(timeout_ms):
            return False
        socket.write(json.dumps({"model": os.path.abspath(model) if model else None}).encode() + b"\n")
        socket.flush()
        answered = socket.waitForReadyRead(timeout_ms) and bytes(socket.readAll()).startswith(b"ok")
        socket.disconnectFromServer()
        return answered

    def holder(self) -> str:
        """Who holds the folder, for a person: "process 1234 (python3) on host"."""
        info = self.lock.getLockInfo()         # PySide6: (pid, host name, app name), or False when unknown
        if not isinstance(info, tuple) or len(info) != 3 or not info[0]:
            return "another process"
        pid, host, app = info
        return f"process {pid}" + (f" ({app})" if app else "") + (f" on {host}" if host else "")

    def release(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.lock.isLocked():
            self.lock.unlock()

    def _on_connection(self) -> None:
        while self.server is not None and self.server.hasPendingConnections():
            socket = self.server.nextPendingConnection()
            socket.readyRead.connect(lambda s=socket: self._on_message(s))
            socket.disconnected.connect(socket.deleteLater)

    def _on_message(self, socket) -> None:
        if not socket.canReadLine():
            return
        try:
            message = json.loads(bytes(socket.readLine()).decode("utf-8"))
            model = message.get("model") if isinstance(message, dict) else None
        except ValueError:
            model = None
        socket.write(b"ok\n")
        socket.flush()
        self.activated.emit(model if isinstance(model, str) and model else None)
