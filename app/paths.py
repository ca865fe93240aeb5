"""Where the app keeps its data (the SQLite database) and finds its bundled fonts and icons."""
import os

from petit.assets import asset_dirs

APP_NAME = "Petit"
DB_NAME = "petit.sqlite3"


def data_dir() -> str:
    """The user's data folder: $PETIT_DATA_DIR when set (tests), else Qt's AppDataLocation for "Petit".
    Created when missing."""
    path = os.environ.get("PETIT_DATA_DIR")
    if not path:
        from PySide6.QtCore import QStandardPaths
        path = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
        if not path:
            path = os.path.join(os.path.expanduser("~"), ".local", "share", APP_NAME)
    os.makedirs(path, exist_ok=True)
    return path


def db_path() -> str:
    return os.path.join(data_dir(), DB_NAME)


def asset(*parts: str) -> str | None:
    """The first existing `assets/<parts>` of a source checkout or an installed copy; None when absent."""
    for d in asset_dirs():
        path = os.path.join(d, *parts)
        if os.path.exists(path):
            return path
    return None


def asset_files(folder: str, suffix: str) -> list[str]:
    """Every file ending in `suffix` in the first `assets/<folder>` that exists."""
    d = asset(folder)
    if d is None or not os.path.isdir(d):
        return []
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.lower().endswith(suffix))
