"""The entry point of the double-clickable bundle (`python build_app.py`): one executable, three uses.

    Petit                       the desktop app (app.main), with the bundled default model
    Petit MODEL [Qt options]    the desktop app with MODEL open
    Petit COMMAND ...           the `petit` command line: Petit chat, Petit run -m ..., Petit serve, Petit info, ...
    Petit --smoke-test          load the bundled model, answer fixed questions greedily, serve one request, open the
                                app's window offscreen; one line on stdout; exit 0 (PASS) or 1 (FAIL). No window.
    Petit --version | --help

It also runs unfrozen (`python packaging/petit_entry.py --smoke-test`), so the checks can be tried before a build.
Nothing happens at import: tests import this file to check the dispatch.
"""
import os
import sys
import time

# the `petit` subcommands (petit.cli.commands.build_parser); tests/test_bundle.py checks this list against the parser
CLI_COMMANDS = ("run", "chat", "serve", "info", "convert", "train", "export", "verify", "embed", "finetune")

# the smoke test's questions and the answers the bundled model gives them (greedy; tests/test_assets.py too)
SMOKE_QUESTIONS = (("what is 12 plus 7?", "19"), ("which is bigger, 2 or 16?", "16"))
SMOKE_MAX_TOKENS = 8            # every reply is generated greedily with this budget
SMOKE_MODELS = ("default-q8_0.petit", "default-q4_0.petit")
SMOKE_TIMEOUT = 60.0            # seconds for the server and the window to get ready

USAGE = f"""usage: Petit [MODEL] [Qt options]    open the desktop app (with MODEL, default: the last one used)
       Petit COMMAND [options]      the petit command line; COMMAND is one of: {', '.join(CLI_COMMANDS)}
                                    (Petit COMMAND --help for its options)
       Petit --smoke-test [--engine-only] [--verbose]
                                    check this build without opening a window; exit 0 when it works
       Petit --version | --help"""


def route(argv: list[str]) -> tuple[str, list[str]]:
    """What to run for these arguments: ("cli" | "smoke" | "app" | "help" | "version", the arguments for it)."""
    if not argv:
        return "app", []
    first = argv[0]
    if first in CLI_COMMANDS:
        return "cli", list(argv)
    if first == "petit" and len(argv) > 1:          # `Petit petit chat` (a habit from the installed command)
        return route(argv[1:]) if argv[1] in CLI_COMMANDS else ("cli", list(argv[1:]))
    if first == "--smoke-test":
        return "smoke", list(argv[1:])
    if first in ("-h", "--help", "help"):
        return "help", []
    if first in ("-V", "--version"):
        return "version", []
    return "app", list(argv)                        # a model path, or Qt's own options (-platform, -style ...)


def main(argv: list[str] | None = None) -> int:
    for stream in ("stdout", "stderr"):             # a windowless build (Windows, macOS .app) may have none
        if getattr(sys, stream) is None:
            setattr(sys, stream, open(os.devnull, "w"))
    what, args = route(sys.argv[1:] if argv is None else list(argv))
    if what == "cli":
        from petit.cli import main as cli_main
        return cli_main(args)
    if what == "smoke":
        return smoke_test(args)
    if what == "help":
        print(USAGE)
        return 0
    if what == "version":
        from petit import __version__
        print(f"Petit {__version__}{' (bundle)' if getattr(sys, 'frozen', False) else ''}")
        return 0
    _name_the_desktop_entry()
    from app.main import main as app_main
    return app_main(args)


def _name_the_desktop_entry() -> None:
    """Tell Qt the app's desktop entry (packaging/petit.desktop), so a Wayland desktop shows its icon and name."""
    try:
        from PySide6.QtGui import QGuiApplication
    except ImportError:                             # app.main says what is missing
        return
    QGuiApplication.setDesktopFileName("petit")


# ---------------------------------------------------------------------------------------------------------------
# the smoke test


class SmokeFailure(Exception):
    pass


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise SmokeFailure(what)


def smoke_engine(say) -> list[str]:
    """The kernels, the bundled files, greedy chat replies from both bundled models, tokenizers, every family."""
    import importlib

    import petit
    from petit.assets import asset_dirs, default_model_path
    from petit.generation import Params, Session
    from petit.native import info

    notes = []
    i = info()
    say(f"kernels: {i['isa']} path, {i['threads']} threads (supported: {', '.join(i['supported'])})")
    notes.append(f"kernels {i['isa']}")

    model_dir = os.path.dirname(default_model_path())
    say(f"assets: {model_dir} (looked in {', '.join(asset_dirs())})")
    for name in SMOKE_MODELS + ("default-model-eval.json", os.path.join("icons", "petit.svg"),
                                os.path.join("icons", "petit.png")):
        _check(os.path.isfile(os.path.join(model_dir, name)), f"the bundled file {name} is missing from {model_dir}")
    fonts = [f for f in os.listdir(os.path.join(model_dir, "fonts")) if f.lower().endswith(".ttf")] \
        if os.path.isdir(os.path.join(model_dir, "fonts")) else []
    _check(bool(fonts), f"no bundled font in {os.path.join(model_dir, 'fonts')}")

    for name in SMOKE_MODELS:
        model = petit.load(os.path.join(model_dir, name))
        try:
            for question, expected in SMOKE_QUESTIONS:
                session = Session(model)                                       # greedy by default
                messages = [{"role": "user", "content": question}]
                steps = list(session.reply(messages, Params(max_tokens=SMOKE_MAX_TOKENS)))
                got = "".join(s.text for s in steps).strip()
                say(f"{name}: {question!r} -> {got!r} ({len(steps)} tokens, expected {expected!r})")
                _check(got == expected, f"{name} answered {question!r} with {got!r}, expected {expected!r}")
        finally:
            model.close()
    notes.append(f"{len(SMOKE_MODELS)} models x {len(SMOKE_QUESTIONS)} answers")

    import tokenizers                              # the Hugging Face tokenizer (Rust extension) loads
    from tokenizers import Tokenizer, models, pre_tokenizers
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    _check(tok.encode("hello world").ids == [1, 2], "the tokenizers extension does not encode")
    say(f"tokenizers {tokenizers.__version__}: OK")

    from petit.models import MODEL_TYPES           # every family module (explicit imports) is there
    for family in MODEL_TYPES.values():
        _check(hasattr(family, "build") and hasattr(family, "Config"), f"{family.__name__} is incomplete")
    for module in ("petit.hf", "petit.loading.folder", "petit.loading.convert", "petit.cli.convert", "trainer.cli",
                   "trainer.export", "trainer.verify"):
        importlib.import_module(module)
    say(f"families: {len(MODEL_TYPES)} ({', '.join(sorted(MODEL_TYPES))})")
    return notes


def smoke_serve(say) -> list[str]:
    """`petit serve` in-process on a free port: /health, then one greedy chat completion over HTTP."""
    import json
    import urllib.request

    from petit.assets import default_model_path
    from petit.server import Server
    from petit.server.engine import ServerWorker

    question, expected = SMOKE_QUESTIONS[0]
    server = Server(ServerWorker(default_model_path(), max_tokens=SMOKE_MAX_TOKENS), host="127.0.0.1", port=0)
    server.start(timeout=SMOKE_TIMEOUT)
    try:
        base = server.url.rstrip("/")
        root = base[:-len("/v1")] if base.endswith("/v1") else base
        with urllib.request.urlopen(root + "/health", timeout=SMOKE_TIMEOUT) as r:
            _check(r.status == 200, f"GET /health answered {r.status}")
        body = json.dumps({"messages": [{"role": "user", "content": question}], "temperature": 0,
                           "max_tokens": SMOKE_MAX_TOKENS}).encode()
        req = urllib.request.Request(base + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=SMOKE_TIMEOUT) as r:
            reply = json.load(r)["choices"][0]["message"]["content"].strip()
    finally:
        server.stop()
    say(f"serve: POST /v1/chat/completions {question!r} -> {reply!r}")
    _check(reply == expected, f"the server answered {question!r} with {reply!r}, expected {expected!r}")
    return ["serve"]


def smoke_app(say) -> list[str]:
    """The desktop app on Qt's offscreen platform (no window): the bundled fonts and icon, the main window with the
    default model loaded, its panels, and one greedy reply through the chat, when the app offers those."""
    import tempfile

    saved = {k: os.environ.get(k) for k in ("QT_QPA_PLATFORM", "PETIT_DATA_DIR")}
    try:
        with tempfile.TemporaryDirectory(prefix="petit-smoke-") as data:
            os.environ["QT_QPA_PLATFORM"] = "offscreen"    # never a window, with or without a display
            os.environ["PETIT_DATA_DIR"] = data            # a throwaway database: the user's chats are untouched
            return _smoke_app_window(say)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _smoke_app_window(say) -> list[str]:
    from PySide6.QtCore import QCoreApplication, QLibraryInfo
    from PySide6.QtGui import QFontDatabase

    from app.main import create_app
    notes = []
    app = create_app([])
    plugins = QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)
    say(f"Qt {QLibraryInfo.version().toString()}, platform {app.platformName()}, plugins {plugins}")
    if sys.platform.startswith("linux") and getattr(sys, "frozen", False):
        for plugin in ("libqxcb.so", "libqwayland.so", "libqoffscreen.so"):
            _check(os.path.isfile(os.path.join(plugins, "platforms", plugin)),
                   f"the Qt platform plugin {plugin} is missing from {plugins}/platforms")
        # an X11 session uses xcb: the libraries it links to are in the bundle (PyInstaller copies them from the
        # build machine), so it must load here too, with no display to try it on
        import ctypes
        try:
            ctypes.CDLL(os.path.join(plugins, "platforms", "libqxcb.so"))
        except OSError as e:
            raise SmokeFailure(f"the X11 (xcb) platform plugin cannot load: {e}") from None
        # Wayland's client libraries are the desktop's own (PyInstaller leaves libwayland-* out on purpose): on a
        # machine without them the plugin cannot load, and that is not the bundle's fault
        try:
            ctypes.CDLL(os.path.join(plugins, "platforms", "libqwayland.so"))
            say("xcb and wayland platform plugins: load")
        except OSError as e:
            say(f"xcb platform plugin: loads; wayland: not on this machine ({e})")
    _check(not app.windowIcon().isNull(), "the app icon did not load")
    families = set(QFontDatabase.families())
    _check("DejaVu Sans" in families, "the bundled font DejaVu Sans is not registered")

    from app.window import MainWindow
    window = MainWindow()
    try:
        chat = getattr(window, "chat", None)
        models = getattr(window, "models", None)
        deadline = time.monotonic() + SMOKE_TIMEOUT
        if chat is not None and hasattr(chat, "model_ready"):
            while not (chat.model_ready and not getattr(models, "loading", False)):
                _check(time.monotonic() < deadline, "the app did not load the bundled model in time")
                _check(getattr(window, "error_dialog", None) is None, "the app could not load the bundled model")
                QCoreApplication.processEvents()
                time.sleep(0.01)
            say(f"app: window ready, model {getattr(chat, 'model_name', '?')!r}")
            notes.append("app window")
        if chat is not None and all(hasattr(chat, a) for a in ("send", "busy", "messages")):
            question, expected = SMOKE_QUESTIONS[0]
            chat.send(question)
            while chat.busy:
                _check(time.monotonic() < deadline, "the app's reply did not end in time")
                QCoreApplication.processEvents()
                time.sleep(0.01)
            last = chat.messages[-1] if chat.messages else None
            got = (getattr(last, "content", "") or "").strip()
            say(f"app: chat {question!r} -> {got!r}")
            # the app's own sampling settings apply here, so only a non-empty reply is required
            _check(bool(got), "the app's chat gave no reply")
            notes.append("app chat")
    finally:
        window.close()
        if hasattr(window, "shutdown"):
            window.shutdown()
        QCoreApplication.processEvents()
    return notes


def smoke_test(args: list[str]) -> int:
    """`Petit --smoke-test [--engine-only] [--verbose]`: exit 0 and a PASS line, or 1 and a FAIL line naming the
    first check that failed."""
    unknown = [a for a in args if a not in ("--engine-only", "--verbose", "-v")]
    if unknown:
        print(f"Petit --smoke-test: unknown option {unknown[0]} (options: --engine-only, --verbose)", file=sys.stderr)
        return 2
    verbose = "--verbose" in args or "-v" in args

    def say(line: str) -> None:
        if verbose:
            print(f"  {line}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    stages = [smoke_engine, smoke_serve] + ([] if "--engine-only" in args else [smoke_app])
    notes = []
    try:
        for stage in stages:
            notes += stage(say)
    except SmokeFailure as e:
        print(f"Petit smoke test: FAIL: {e}", flush=True)
        return 1
    except Exception as e:                          # a missing module or file in the bundle lands here
        lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [""]
        print(f"Petit smoke test: FAIL: {type(e).__name__}: {lines[-1]}", flush=True)   # one line (numpy's is long)
        if verbose:
            import traceback
            traceback.print_exc()
        return 1
    frozen = "bundle" if getattr(sys, "frozen", False) else "not frozen"
    print(f"Petit smoke test: PASS ({frozen}; {', '.join(notes)}) in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
