"""The double-clickable bundle (`python build_app.py`, docs/bundle.md).

Always run (fast, nothing is built): the entry script's dispatch (packaging/petit_entry.py), its smoke test run
unfrozen, the icon writers of build_app.py, the desktop entry, and where petit.assets finds the bundled files.

Run only when PETIT_TEST_BUNDLE=1 (CI sets it after `python build_app.py`): the built folder bundle
dist/Petit/ (or $PETIT_BUNDLE, the path of its executable) passes its --smoke-test and runs `Petit run`, `Petit chat`
on piped input and `Petit info` as the installed `petit` command does, from a clean environment.
"""
import configparser
import importlib.util
import os
import shlex
import shutil
import struct
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGING = os.path.join(ROOT, "packaging")
ASSETS = os.path.join(ROOT, "assets")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


entry = _load("petit_entry", os.path.join(PACKAGING, "petit_entry.py"))
build_app = _load("build_app", os.path.join(ROOT, "build_app.py"))


# --- the entry script's dispatch ---------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    ([], ("app", [])),
    (["model.petit"], ("app", ["model.petit"])),
    (["-platform", "offscreen"], ("app", ["-platform", "offscreen"])),
    (["chat", "-t", "0"], ("cli", ["chat", "-t", "0"])),
    (["run", "-m", "m.petit", "-p", "hi"], ("cli", ["run", "-m", "m.petit", "-p", "hi"])),
    (["serve", "--port", "0"], ("cli", ["serve", "--port", "0"])),
    (["info"], ("cli", ["info"])),
    (["petit", "chat"], ("cli", ["chat"])),
    (["--smoke-test"], ("smoke", [])),
    (["--smoke-test", "--verbose"], ("smoke", ["--verbose"])),
    (["--help"], ("help", [])),
    (["--version"], ("version", [])),
])
def test_route(argv, expected):
    assert entry.route(argv) == expected


def test_every_cli_command_is_dispatched():
    """A command added to `petit` must reach the command line, not the app (which would take it for a model)."""
    from petit.cli.commands import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(entry.CLI_COMMANDS) == set(sub.choices), \
        "a petit command was added or removed: update CLI_COMMANDS in packaging/petit_entry.py"


def test_cli_commands_run_the_petit_command_line(capsys):
    assert entry.main(["info"]) == 0
    assert "kernel paths:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        entry.main(["run", "--no-such-flag"])
    assert e.value.code == 2


def test_help_and_version(capsys):
    assert entry.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--smoke-test" in out and all(c in out for c in entry.CLI_COMMANDS)
    assert entry.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("Petit ")


def test_no_arguments_open_the_app(monkeypatch):
    import types
    calls = []
    fake = types.ModuleType("app.main")
    fake.main = lambda argv: calls.append(argv) or 0
    monkeypatch.setitem(sys.modules, "app.main", fake)
    assert entry.main([]) == 0
    assert entry.main(["some.petit"]) == 0
    assert calls == [[], ["some.petit"]]


def test_smoke_test_rejects_unknown_options(capsys):
    assert entry.smoke_test(["--bogus"]) == 2
    assert "unknown option --bogus" in capsys.readouterr().err


def test_smoke_test_passes_unfrozen():
    """The same checks the bundle runs, on this checkout (in a child process: it starts Qt, offscreen)."""
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    args = [] if importlib.util.find_spec("PySide6") else ["--engine-only"]
    p = subprocess.run([sys.executable, os.path.join(PACKAGING, "petit_entry.py"), "--smoke-test", *args],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("Petit smoke test: PASS (not frozen;")


def test_a_failing_check_prints_one_fail_line(monkeypatch, capsys):
    def broken(say):
        raise ImportError("line one\nOriginal error was: libfoo.so: cannot open shared object file")
    monkeypatch.setattr(entry, "smoke_engine", broken)
    assert entry.smoke_test(["--engine-only"]) == 1
    out = capsys.readouterr().out
    assert out == "Petit smoke test: FAIL: ImportError: Original error was: libfoo.so: cannot open shared object file\n"


# --- build_app.py, the spec, the desktop entry ---------------------------------------------------------------------

def _png():
    with open(os.path.join(ASSETS, "icons", "petit.png"), "rb") as f:
        return f.read()


def test_ico_wraps_the_png():
    png = _png()
    ico = build_app.ico_from_png(png)
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    w, h, _colors, _res, planes, bpp, size, offset = struct.unpack("<BBBBHHII", ico[6:22])
    assert (reserved, kind, count, planes, bpp) == (0, 1, 1, 1, 32)
    assert (w or 256, h or 256) == build_app.png_size(png)
    assert ico[offset:offset + size] == png


def test_icns_wraps_the_png():
    png = _png()
    icns = build_app.icns_from_png(png)
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    assert icns[8:12] == b"ic08" and icns[16:] == png


def test_icon_writers_refuse_what_they_cannot_hold():
    with pytest.raises(ValueError):
        build_app.png_size(b"GIF89a" + b"\0" * 30)
    big = _png()[:16] + struct.pack(">II", 300, 300) + _png()[24:]
    with pytest.raises(ValueError):
        build_app.ico_from_png(big)
    with pytest.raises(ValueError):
        build_app.icns_from_png(big)


def test_onefile_name_does_not_clash_with_the_folder():
    name = build_app.onefile_name()
    assert name != build_app.NAME and name.startswith("Petit-")
    from petit import __version__
    assert __version__ in name


def test_spec_and_hooks_are_valid_python():
    for path in [os.path.join(PACKAGING, "petit.spec")] + [
            os.path.join(PACKAGING, "hooks", f) for f in os.listdir(os.path.join(PACKAGING, "hooks"))
            if f.endswith(".py")]:
        with open(path) as f:
            compile(f.read(), path, "exec")


def test_desktop_entry():
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(os.path.join(PACKAGING, "petit.desktop"))
    e = parser["Desktop Entry"]
    assert e["Type"] == "Application" and e["Name"] == "Petit" and e["Terminal"] == "false"
    assert e["Exec"].split()[0] == "Petit"
    assert e["Icon"] == "petit" and os.path.isfile(os.path.join(ASSETS, "icons", "petit.svg"))
    assert e["Categories"].endswith(";")


# --- where petit.assets finds the bundled files -------------------------------------------------------------------

def test_default_model_from_a_checkout():
    from petit.assets import default_model_path
    assert os.path.samefile(default_model_path(), os.path.join(ASSETS, "default-q8_0.petit"))


def test_installed_package_data_comes_first(tmp_path, monkeypatch):
    """An installed petit (wheel or bundle) has its assets in petit/_assets/, found through importlib.resources."""
    import importlib.resources

    import petit.assets
    pkg = tmp_path / "petit"
    (pkg / "_assets").mkdir(parents=True)
    (pkg / "_assets" / "default-q8_0.petit").write_bytes(b"x")
    monkeypatch.setattr(importlib.resources, "files", lambda name: pkg)
    assert petit.assets.asset_dirs()[0] == str(pkg / "_assets")
    assert petit.assets.default_model_path() == str(pkg / "_assets" / "default-q8_0.petit")
    assert petit.assets.default_model_path("default-q4_0.petit") == os.path.join(ASSETS, "default-q4_0.petit")


def test_a_missing_model_names_every_place_looked_in():
    from petit.assets import asset_dirs, default_model_path
    with pytest.raises(FileNotFoundError) as e:
        default_model_path("no-such-model.petit")
    assert all(d in str(e.value) for d in asset_dirs())


def test_package_data_covers_every_asset():
    """pyproject.toml installs every file of assets/ as petit._assets package data."""
    tomllib = pytest.importorskip("tomllib")
    import fnmatch
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        setuptools_cfg = tomllib.load(f)["tool"]["setuptools"]
    assert setuptools_cfg["package-dir"]["petit._assets"] == "assets"
    patterns = setuptools_cfg["package-data"]["petit._assets"]
    for base, _dirs, files in os.walk(ASSETS):
        for name in files:
            rel = os.path.relpath(os.path.join(base, name), ASSETS).replace(os.sep, "/")
            if rel.endswith((".py", ".pyc")) or "__pycache__" in rel:
                continue
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), f"assets/{rel} would not be installed"


# --- the built bundle (PETIT_TEST_BUNDLE=1) --------------------------------------------------------------------

needs_bundle = pytest.mark.skipif(os.environ.get("PETIT_TEST_BUNDLE") != "1",
                                  reason="the built bundle is tested when PETIT_TEST_BUNDLE=1 (after build_app.py)")


def _bundle() -> str:
    path = os.environ.get("PETIT_BUNDLE") or build_app.onedir_executable(os.path.join(ROOT, "dist"))
    assert os.path.isfile(path), f"no bundle at {path}: build it first with `python build_app.py --onedir`"
    return path


def _run(args, input=None, cwd=None, timeout=300):
    """The bundle as a user runs it: no PYTHON* variables, no checkout on the path, from another folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PETIT_"))}
    return subprocess.run([_bundle(), *args], input=input, capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd, stdin=None if input is not None else subprocess.DEVNULL)


@needs_bundle
def test_bundle_smoke_test(tmp_path):
    p = _run(["--smoke-test", "--verbose"], cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("Petit smoke test: PASS (bundle;")


@needs_bundle
def test_bundle_chat_on_piped_input(tmp_path):
    p = _run(["chat", "-t", "0", "-n", "8"], input="what is 12 plus 7?\nwhich is bigger, 2 or 16?\n", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["19", "16"]
    assert "_assets" in p.stderr                    # the bundled model, found inside the bundle


@needs_bundle
def test_bundle_run(tmp_path):
    prompt = "<|im_start|>user\nwhat is 3 plus 4?<|im_end|>\n<|im_start|>assistant\n"
    p = _run(["run", "-m", os.path.join(ASSETS, "default-q4_0.petit"), "-p", prompt, "-n", "4", "-t", "0"],
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == prompt + "7\n"


@needs_bundle
def test_bundle_info_and_errors(tmp_path):
    p = _run(["info"], cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("petit ")
    p = _run(["run", "-m", str(tmp_path / "missing.petit")], cwd=tmp_path)
    assert p.returncode == 1 and p.stderr.startswith("petit run: error:")


@needs_bundle
def test_bundle_leaves_the_heavy_packages_out():
    internal = os.path.join(os.path.dirname(_bundle()), "_internal")
    if not os.path.isdir(internal):
        pytest.skip("not a PyInstaller 6 folder bundle")
    present = set(os.listdir(internal))
    assert not present & {"torch", "transformers", "safetensors", "scipy", "PIL", "tkinter"}
    assert build_app.du(os.path.dirname(_bundle())) < build_app.MAX_MB * 1e6


def _python_dirs(bundle_dir: str) -> list[str]:
    """Every folder a Python on this machine loads its standard library or packages from (never the bundle's)."""
    import glob
    import site
    dirs = {sys.prefix, sys.base_prefix, *glob.glob("/usr/lib/python3*"), *glob.glob("/usr/local/lib/python3*"),
            *site.getsitepackages()}
    bundle = os.path.realpath(bundle_dir) + os.sep
    dirs = sorted(d for d in map(os.path.realpath, dirs)
                  if os.path.isdir(d) and d != "/" and not bundle.startswith(d + os.sep))
    return [d for d in dirs if not any(d.startswith(o + os.sep) for o in dirs)]   # a hidden folder hides its own


@needs_bundle
def test_bundle_runs_with_every_python_on_the_machine_hidden(tmp_path):
    """"Runs on a machine with no Python": in a private mount namespace, an empty tmpfs covers each Python's standard
    library and packages (the proof that it worked: python3 can no longer start), and the bundle still passes its
    smoke test and answers a chat."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to hide the machine's Pythons")
    exe = _bundle()
    hide = _python_dirs(os.path.dirname(exe))
    assert hide, "found no Python folders to hide"
    script = "\n".join([
        "set -e",
        *(f"mount -t tmpfs petit-no-python {shlex.quote(d)}" for d in hide),
        f"if {shlex.quote(sys.executable)} -c 'import encodings' 2>/dev/null; then echo 'python still runs'; exit 3; fi",
        "if python3 -c 'import encodings' 2>/dev/null; then echo 'python3 still runs'; exit 3; fi",
        f"{shlex.quote(exe)} --smoke-test",
        f"printf 'what is 12 plus 7?\\n' | {shlex.quote(exe)} chat -t 0 -n 8",
    ])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PETIT_"))}
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                       text=True, timeout=300, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"hid {hide}\n{p.stdout}\n{p.stderr[-3000:]}"
    lines = p.stdout.splitlines()
    assert lines[0].startswith("Petit smoke test: PASS (bundle;"), p.stdout
    assert lines[-1] == "19"
