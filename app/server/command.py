"""The command line that runs `petit serve` for the Server tab: the model, where to listen, and the model's
resolved settings (the Settings panel's values) as the defaults of every request."""
import ipaddress
import os
import socket
import sys

# settings key -> `petit serve` flag (the keys are app.settings' resolved values)
FLAGS = (("temperature", "--temperature"), ("top_k", "--top-k"), ("top_p", "--top-p"), ("min_p", "--min-p"),
         ("repetition_penalty", "--repeat-penalty"), ("frequency_penalty", "--frequency-penalty"),
         ("presence_penalty", "--presence-penalty"), ("seed", "--seed"), ("max_tokens", "--max-tokens"),
         ("system", "--system"), ("format", "--format"), ("n_ctx", "--ctx"), ("kv_type", "--kv"),
         ("weights", "--weights"))


def serve_args(model: str, host: str, port: int, options: dict | None = None, allowed_hosts=()) -> list[str]:
    """`petit serve` arguments (without the command): MODEL, --host, --port, the settings, the extra host names
    requests may carry (--allowed-host), --stats and --log-requests (the live log's lines)."""
    args = [model, f"--host={host}", f"--port={port}"]
    args += [f"--allowed-host={name}" for name in allowed_hosts]
    options = options or {}
    for key, flag in FLAGS:
        value = options.get(key)
        if value is None or value == "":
            continue
        args.append(f"{flag}={value}")
    if options.get("drop_old_turns"):
        args.append("--drop-old-turns")
        if options.get("n_keep"):
            args.append(f"--n-keep={options['n_keep']}")
    if options.get("speculation") == "lookup":
        args.append("--lookup")
    elif options.get("speculation") == "model" and options.get("draft_model"):
        args.append(f"--draft={options['draft_model']}")
    args.append("--stats")                       # a line per generation, for the log
    args.append("--log-requests")                # a line per HTTP request, for the log
    return args


def program(args: list[str]) -> tuple[str, list[str]]:
    """(program, arguments) for a child process: this Python running `petit serve` (`-m petit.cli serve`), or, in
    the bundled app (PyInstaller), the bundle's own `serve` command (on Windows its console executable, whose output
    can be read). Both are the same command with the same flags, so both logs show the same lines."""
    if getattr(sys, "frozen", False):
        exe = sys.executable
        console = os.path.join(os.path.dirname(exe), "petit-cli.exe")
        if sys.platform == "win32" and os.path.exists(console):
            exe = console
        return exe, ["serve", *args]
    return sys.executable, ["-m", "petit.cli", "serve", *args]


def environment(base: dict, api_key: str | None) -> dict:
    """The child's environment: unbuffered output, the app's own source folder importable (the petit beside it), the
    API key in
    PETIT_API_KEY (kept out of the process list), or no key at all, even one this process was given, and the
    lifeline that ends the server with the app however the app ends (petit.server.lifeline: the parent-death
    signal on Linux, end of file on its stdin, a pipe QProcess holds, everywhere)."""
    env = dict(base)
    env["PETIT_LIFELINE"] = "parent,stdin"
    env["PETIT_PARENT_PID"] = str(os.getpid())
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    if api_key:
        env["PETIT_API_KEY"] = api_key
    else:
        env.pop("PETIT_API_KEY", None)
    return env


def is_loopback(host: str) -> bool:
    """Whether only this computer can reach a server listening on `host`."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def default_host_names() -> list[str]:
    """The names other computers may use for this one: its host name (and NAME.local, the mDNS name), which the
    server's Host check (against DNS rebinding) must accept when it listens on the network."""
    name = socket.gethostname().strip()
    if not name or name == "localhost":
        return []
    return [name] if "." in name else [name, f"{name}.local"]


def display_url(url: str) -> str:
    """The URL a client on this machine uses: a server listening on every address is reached at 127.0.0.1."""
    for wildcard in ("//0.0.0.0:", "//[::]:"):
        url = url.replace(wildcard, "//127.0.0.1:")
    return url
