"""The QThread the app's workers share: a cancel flag that the GUI thread sets and the work polls."""
import threading

from PySide6.QtCore import QThread


class CancellableThread(QThread):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Ask the work to stop (safe from any thread); it polls `cancelled`."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()
