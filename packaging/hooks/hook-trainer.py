"""PyInstaller hook for the trainer (`Petit train / export / verify`): every module, as for petit."""
from PyInstaller.utils.hooks import collect_submodules

hiddenimports = collect_submodules("trainer")
