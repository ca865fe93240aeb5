"""A server that a dead instance of the app left running, and who holds a port.

The app records the pid and port of the `petit serve` child it starts in its data folder (server.json) and removes
the record when the child ends. Normally the child ends with the app however the app ends (petit.server.lifeline),
but if one is left behind it keeps the port and the relaunched app could not start its server: before starting,
`end_leftover` ends the server the record names if that process still runs and is one of ours (its command line
runs `petit serve`); any other program is never touched. When the port is still taken,
`port_problem` says which process holds it (from /proc on Linux), so the user knows what to stop."""
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time

from app.paths import data_dir

RECORD = "server.json"
END_WAIT_S = 5.0
IN_USE = {errno.EADDRINUSE, 10048}          # 10048: Windows' WSAEADDRINUSE


def record_path() -> str:
    return os.path.join(data_dir(), RECORD)


def write_record(pid: int, host: str, port: int) -> None:
    """Record the server this app started (written to a temporary name and renamed)."""
    path = record_path()
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": pid, "host": host, "port": port, "app_pid": os.getpid()}, f)
    os.replace(tmp, path)


def read_record() -> dict | None:
    try:
        with open(record_path(), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def clear_record(pid: int | None = None) -> None:
    """Remove the record (only if it names `pid`, when given)."""
    record = read_record()
    if pid is not None and record is not None and record["pid"] != pid:
        return
    try:
        os.remove(record_path())
    except OSError:
        pass


# processes
def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as ended). On Windows always False: os.kill(pid, 0) would signal it."""
    if sys.platform == "win32":
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def command_line(pid: int) -> list[str] | None:
    """The process's command line: /proc on Linux, `ps` on macOS and the BSDs; None when unknown."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        pass
    if sys.platform == "win32":
        return None
    try:
        out = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.split() or None


def process_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        cmd = command_line(pid)
        return os.path.basename(cmd[0]) if cmd else None


def is_our_server(pid: int) -> bool:
    """Whether `pid` runs the app's server: a Petit program's `serve` command (`python -m petit.cli serve`, the
    bundle's `Petit serve`), or app.server.runner, which app versions before issue 13 ran."""
    cmd = command_line(pid)
    if not cmd:
        return False
    return "app.server.runner" in cmd or ("serve" in cmd and any("petit" in a.lower() for a in cmd[:3]))


def end_leftover() -> str | None:
    """End the server the record names if it still runs and is ours (SIGTERM, then SIGKILL after END_WAIT_S).
    Returns what was done, for the log; None when there was nothing to end."""
    record = read_record()
    if record is None:
        return None
    pid = record["pid"]
    if pid == os.getpid() or not alive(pid) or not is_our_server(pid):
        clear_record()
        return None
    for sig in (signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        end = time.monotonic() + END_WAIT_S
        while alive(pid) and time.monotonic() < end:
            time.sleep(0.02)
        if not alive(pid):
            break
    # the process can look ended (its main thread a zombie) while its other threads still exit and its socket is
    # still open: the port is what the new server needs, so wait for it too
    host, port = record.get("host") or "127.0.0.1", record.get("port")
    end = time.monotonic() + END_WAIT_S
    while isinstance(port, int) and port_taken(host, port) and time.monotonic() < end:
        time.sleep(0.02)
    clear_record()
    return f"ended the server (pid {pid}, port {record.get('port')}) an earlier run of Petit left behind"


# ports
def port_problem(host: str, port: int) -> str | None:
    """A sentence when `port` is taken on `host` (naming the process holding it when it can be found), else None.
    Other errors (a host that is not this machine's...) are left for the server to report."""
    if not port_taken(host, port):
        return None
    holder = port_holder(port)
    if holder is not None:
        pid, name = holder
        return f"Port {port} is in use by {name} (pid {pid}): stop that program or choose another port."
    return f"Port {port} is in use by another program: choose another port (0 picks any free one)."


def port_taken(host: str, port: int) -> bool:
    """Whether binding `port` on `host` fails because something holds it (other errors are the server's to say)."""
    if port == 0:
        return False
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            if sys.platform != "win32":          # as the server does: a port in TIME_WAIT is free
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host.strip("[]"), port))
    except OSError as e:
        return e.errno in IN_USE or getattr(e, "winerror", None) in IN_USE
    return False


def port_holder(port: int, proc: str = "/proc") -> tuple[int, str] | None:
    """(pid, name) of a process listening on TCP `port`, found through /proc (Linux; processes of this user);
    None when unknown."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table)) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f"socket:[{fields[9]}]")
        except (OSError, ValueError):
            continue
    if not inodes:
        return None
    try:
        pids = [int(p) for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return None
    for pid in sorted(pids):
        fd_dir = os.path.join(proc, str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(os.path.join(fd_dir, fd)) in inodes:
                    return pid, process_name(pid) or "an unknown program"
            except OSError:
                continue
    return None
