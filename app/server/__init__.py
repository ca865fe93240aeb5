"""The Server tab: `petit serve` for the loaded model in a child process, started and stopped from the window.

    ServerPanel   panel.py: host, port, API key, Start / Stop, the base URL to copy, the live log
    ServerProcess process.py: the QProcess (start, stop = terminate then kill, shutdown = stop and wait)
    command.py    the command line: the model's settings as `petit serve` flags, and --log-requests, so the live
                  log has a line per HTTP request (the same command in the source tree and in the bundle)
    leftover.py   the running server's pid in the data folder; ending one a killed app left; who holds a port
"""
from app.server.panel import ServerPanel

__all__ = ["ServerPanel"]
