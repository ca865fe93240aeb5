"""The model library's state: the folders the user chose (kept in the database), the other apps' stores found on
this machine, the entries of the last scan. Scans run on a Worker thread (app.threads) one at a time; a change
seen meanwhile (QFileSystemWatcher on every folder visited, debounced) asks for one more scan when it ends."""
import os

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from app.library import locations
from app.library.scan import ScanResult, scan
from app.threads import Worker, WorkerSlot

FOLDERS_KEY = "library_folders"
SETTLE_MS = 400                # a download or a copy changes a folder many times: scan once it settles


class ModelLibrary(QObject):
    scan_started = Signal()
    scanned = Signal(object)          # list[Entry]
    scan_failed = Signal(str)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.folders: list[str] = [f for f in (state.get(FOLDERS_KEY) or []) if isinstance(f, str)]
        self.entries: list = []
        self._known: dict = {}
        self._slot = WorkerSlot(self)
        self._again = False
        self.watcher = QFileSystemWatcher(self)
        self.watcher.directoryChanged.connect(self._on_changed)
        self.watcher.fileChanged.connect(self._on_changed)
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(SETTLE_MS)
        self._settle.timeout.connect(self.refresh)

    @property
    def scanning(self) -> bool:
        return self._slot.busy

    def stores(self) -> list[tuple[str, str]]:
        return locations.known_stores(locations.home())

    def add_folder(self, path: str) -> None:
        path = os.path.normpath(os.path.abspath(path))
        if path and path not in self.folders:
            self.folders.append(path)
            self.state.set(FOLDERS_KEY, self.folders)
            self.refresh()

    def remove_folder(self, path: str) -> None:
        if path in self.folders:
            self.folders.remove(path)
            self.state.set(FOLDERS_KEY, self.folders)
            self.refresh()

    def refresh(self) -> None:
        """Scan again (after the scan in progress, if any)."""
        if self._slot.busy:
            self._again = True
            return
        self._again = False
        job = Worker(scan, list(self.folders), self.stores(), dict(self._known), name="petit-library")
        job.succeeded.connect(self._on_scanned)
        job.failed.connect(self.scan_failed)
        self._slot.start(job, then=self._after)
        self.scan_started.emit()

    def _after(self) -> None:
        if self._again:
            self.refresh()

    def _on_scanned(self, result: ScanResult) -> None:
        self.entries = result.entries
        self._known = {e.path: e for e in result.entries}
        self._watch(result.folders + [e.path for e in result.entries if os.path.isfile(e.path)])
        self.scanned.emit(self.entries)

    def _watch(self, paths: list[str]) -> None:
        old = set(self.watcher.directories()) | set(self.watcher.files())
        new = {p for p in paths if os.path.exists(p)}
        for p in old - new:
            self.watcher.removePath(p)
        add = sorted(new - old)
        if add:
            self.watcher.addPaths(add)

    def _on_changed(self, _path: str) -> None:
        self._settle.start()

    def shutdown(self) -> None:
        self._settle.stop()
        self._again = False
        self._slot.shutdown()
        self.watcher.blockSignals(True)
