"""The Server tab: `petit serve` for the loaded model in a child process, started and stopped from the window.

    ServerPanel   panel.py: host, port, API key, Start / Stop, the base URL to copy, the live log
    ServerProcess process.py: the QProcess (start, stop = terminate then kill, shutdown = stop and wait)
    command.py    the command line: the model's settings as `petit serve` flags
    runner.py     `python -m app.server.runner`: `petit serve` that also logs every HTTP request on stderr
    leftover.py   the running server's pid in the data folder; ending one a killed app left; who holds a port

ServerPanel is imported on first use, so the child process (runner.py) never loads Qt.
"""


def __getattr__(name):
    if name == "ServerPanel":
        from app.server.panel import ServerPanel
        return ServerPanel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
