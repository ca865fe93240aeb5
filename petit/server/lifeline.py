"""Ending `petit serve` with the program that started it, however that program ends (even kill -9): the desktop
app runs the server as a child process, and an orphaned server would keep the port, so that the relaunched app
could not start its own.

Opt-in through the environment, which the app sets for its child (a server started from a terminal is not
affected):

    PETIT_LIFELINE    comma-separated: "parent" and/or "stdin"
    PETIT_PARENT_PID  the parent's pid (to catch a parent that died before the child armed its lifeline)

"parent": on Linux, prctl(PR_SET_PDEATHSIG, SIGTERM): the kernel sends SIGTERM when the parent dies.
"stdin": a daemon thread reads stdin (a pipe whose write end only the parent holds) until end of file, which the
OS delivers when the parent exits or dies, on Linux, macOS and Windows alike. The server is then asked to stop
(SIGTERM: it ends the reply in progress and exits) and ended outright after GRACE_S if it has not.
"""
import os
import signal
import sys
import threading

GRACE_S = 5.0
PR_SET_PDEATHSIG = 1


def arm(environ=None) -> list[str]:
    """Arm what PETIT_LIFELINE asks for; returns the mechanisms armed (for the tests and the log)."""
    environ = os.environ if environ is None else environ
    wanted = {w.strip() for w in environ.get("PETIT_LIFELINE", "").split(",") if w.strip()}
    parent = environ.get("PETIT_PARENT_PID", "")
    parent_pid = int(parent) if parent.isdigit() else None
    armed = []
    if "parent" in wanted and _parent_death_signal():
        armed.append("parent")
    if "stdin" in wanted and _watch_stdin():
        armed.append("stdin")
    if armed and parent_pid is not None and sys.platform != "win32" and os.getppid() != parent_pid:
        _end()                           # the parent died before the lifeline was armed: nobody would signal it
    return armed


def _parent_death_signal() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_stdin() -> bool:
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else None
    except (OSError, ValueError):
        fd = None
    if fd is None:
        return False

    def watch():
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass
        _end()
    threading.Thread(target=watch, name="petit-lifeline", daemon=True).start()
    return True


def _end() -> None:
    """Stop the way Ctrl+C / terminate does, and for sure after GRACE_S."""
    timer = threading.Timer(GRACE_S, lambda: os._exit(1))
    timer.daemon = True
    timer.start()
    os.kill(os.getpid(), signal.SIGTERM)
