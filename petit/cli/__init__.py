"""The `petit` command line (the `petit` console script, `python -m petit`, `python -m petit.cli`): commands.py builds
the parser and runs a command, one module per command (run, chat, serve, info, convert; repl.py is chat's loop),
options.py holds the flags several commands share and argtypes.py the flag value types. train, export and verify
come from the trainer package: this package is the only part of petit that imports it."""
from petit.cli.commands import main

__all__ = ["main"]
