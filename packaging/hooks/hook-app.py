"""PyInstaller hook for the desktop app: take every app module there is at build time, so none a static scan
misses (a module imported inside a function) is left out of the bundle."""
from PyInstaller.utils.hooks import collect_submodules

hiddenimports = collect_submodules("app")
