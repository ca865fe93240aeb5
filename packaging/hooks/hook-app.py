"""PyInstaller hook for the desktop app: app.plugins imports the panels (app.training, app.server) by name, so a
static scan cannot see them; take every app module there is at build time."""
from PyInstaller.utils.hooks import collect_submodules

hiddenimports = collect_submodules("app")
