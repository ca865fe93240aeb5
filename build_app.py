"""Build the double-clickable Petit app with PyInstaller (docs/bundle.md).

    pip install -e . && pip install pyinstaller PySide6-Essentials starlette uvicorn
    python build_app.py                  # dist/Petit/ (a folder: starts fast) and dist/Petit-VERSION-OS-ARCH (one file)
    python build_app.py --onedir         # only the folder (what CI builds)
    python build_app.py --onefile        # only the single file

Both hold the compiled kernels, the bundled default models, the fonts and the icon, and run on a machine with no
Python. After building, each is checked with `--smoke-test` (skip with --no-smoke-test), and the sizes, the build
time and each smoke test's cold start time are printed. The folder must stay under 250 MB (--max-mb).

Same command on Linux, Windows and macOS (PyInstaller does not cross-compile: build on each system for itself).
"""
import argparse
import os
import platform
import shutil
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
PACKAGING = os.path.join(ROOT, "packaging")
SPEC = os.path.join(PACKAGING, "petit.spec")
ICON_PNG = os.path.join(ROOT, "assets", "icons", "petit.png")
NAME = "Petit"
MAX_MB = 250
LINUX_EXTRAS = (os.path.join(PACKAGING, "petit.desktop"), os.path.join(PACKAGING, "install-linux.sh"),
                os.path.join(ROOT, "assets", "icons", "petit.svg"), ICON_PNG)


def version() -> str:
    with open(os.path.join(ROOT, "petit", "__init__.py")) as f:
        for line in f:
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    return "0"


def system_name() -> str:
    return {"win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform.rstrip("0123456789"))


def onefile_name() -> str:
    """Petit-0.1.0-linux-x86_64 (the folder bundle is dist/Petit/, so the single file cannot be dist/Petit)."""
    machine = platform.machine().lower().replace("amd64", "x86_64") or "unknown"
    return f"{NAME}-{version()}-{system_name()}-{machine}"


def exe(path: str) -> str:
    return path + ".exe" if sys.platform == "win32" else path


def onedir_executable(dist: str) -> str:
    if sys.platform == "darwin":
        return os.path.join(dist, f"{NAME}.app", "Contents", "MacOS", NAME)
    return exe(os.path.join(dist, NAME, NAME))


def onedir_console_executable(dist: str) -> str:
    """The folder bundle's executable with a console: on Windows petit-cli.exe (Petit.exe has no console)."""
    if sys.platform == "win32":
        return os.path.join(dist, NAME, "petit-cli.exe")
    return onedir_executable(dist)


def onefile_executable(dist: str) -> str:
    return exe(os.path.join(dist, onefile_name()))


# icons: PyInstaller wants .ico (Windows) / .icns (macOS); both may simply wrap a PNG, so no image library is needed


def png_size(png: bytes) -> tuple[int, int]:
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    return struct.unpack(">II", png[16:24])


def ico_from_png(png: bytes) -> bytes:
    """A one-image .ico holding the PNG as it is (Windows Vista and later read PNG-compressed icons)."""
    w, h = png_size(png)
    if w > 256 or h > 256:
        raise ValueError(f"an .ico image is at most 256x256, this PNG is {w}x{h}")
    entry = struct.pack("<BBBBHHII", w % 256, h % 256, 0, 0, 1, 32, len(png), 6 + 16)
    return struct.pack("<HHH", 0, 1, 1) + entry + png


def icns_from_png(png: bytes) -> bytes:
    """A one-image .icns holding the PNG (types ic07/ic08/ic09/ic10 are PNG data of 128/256/512/1024 pixels)."""
    w, h = png_size(png)
    kinds = {128: b"ic07", 256: b"ic08", 512: b"ic09", 1024: b"ic10"}
    if w != h or w not in kinds:
        raise ValueError(f"an .icns PNG image is 128, 256, 512 or 1024 pixels square, this one is {w}x{h}")
    body = kinds[w] + struct.pack(">I", 8 + len(png)) + png
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def write_icon(work: str) -> str | None:
    """The executable's icon for this system, written into `work`; None on Linux (the desktop entry has it)."""
    if sys.platform not in ("win32", "darwin") or not os.path.isfile(ICON_PNG):
        return None
    with open(ICON_PNG, "rb") as f:
        png = f.read()
    path = os.path.join(work, "petit.ico" if sys.platform == "win32" else "petit.icns")
    os.makedirs(work, exist_ok=True)
    with open(path, "wb") as f:
        f.write(ico_from_png(png) if sys.platform == "win32" else icns_from_png(png))
    return path


# checks before building


def preflight() -> list[str]:
    """What is missing for a build, each with the command that fixes it."""
    from importlib.util import find_spec
    problems = []
    if find_spec("PyInstaller") is None:
        problems.append("PyInstaller is not installed: pip install pyinstaller")
    sys.path.insert(0, ROOT)
    try:
        import petit._kernels  # noqa: F401
    except ImportError as e:
        problems.append(f"petit's C kernels are not built ({e}): pip install -e .")
    finally:
        sys.path.remove(ROOT)
    for module, package in (("PySide6", "PySide6-Essentials"), ("jinja2", "jinja2"), ("tokenizers", "tokenizers"),
                            ("starlette", "starlette"), ("uvicorn", "uvicorn"), ("numpy", "numpy"),
                            ("cffi", "cffi")):
        if find_spec(module) is None:
            problems.append(f"{module} is not installed, and the bundle needs it: pip install {package}")
    if sys.platform.startswith("linux"):
        for tool in ("objdump", "ldd"):
            if shutil.which(tool) is None:
                problems.append(f"PyInstaller needs `{tool}` on Linux: apt-get install binutils libc-bin")
    return problems


# the build


def du(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for base, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(base, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def run_pyinstaller(targets: list[str], dist: str, work: str, icon: str | None, clean: bool, log_level: str) -> None:
    env = {"PETIT_BUNDLE_TARGETS": ",".join(targets), "PETIT_BUNDLE_ONEFILE": onefile_name(),
           "PETIT_BUNDLE_ICON": icon or "", "PETIT_VERSION": version()}
    cmd = [sys.executable, "-m", "PyInstaller", SPEC, "--noconfirm", "--distpath", dist, "--workpath", work,
           "--log-level", log_level] + (["--clean"] if clean else [])
    print("build_app.py: " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, **env})


def add_linux_extras(dist: str) -> None:
    """The desktop entry, its icon and the per-user installer, beside the executable in dist/Petit/."""
    folder = os.path.join(dist, NAME)
    for path in LINUX_EXTRAS:
        if os.path.isfile(path):
            shutil.copy2(path, folder)
    installer = os.path.join(folder, "install-linux.sh")
    if os.path.isfile(installer):
        os.chmod(installer, 0o755)


def smoke(executable: str, extra=(), timeout: float = 300.0) -> tuple[bool, float, str]:
    """Run `executable --smoke-test` once (a cold start when it is the first run since the build); returns whether
    it passed, the seconds it took and its last line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}     # nothing from this Python leaks in
    t0 = time.perf_counter()
    p = subprocess.run([executable, "--smoke-test", *extra], capture_output=True, text=True, timeout=timeout,
                       env=env, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    lines = (p.stdout.strip() or p.stderr.strip() or "(no output)").splitlines()
    if p.returncode != 0 and p.stderr.strip():
        sys.stderr.write(p.stderr[-4000:])
    return p.returncode == 0, seconds, lines[-1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Build the Petit app bundle with PyInstaller (docs/bundle.md).")
    ap.add_argument("--onedir", action="store_true", help="build only the folder bundle dist/Petit/")
    ap.add_argument("--onefile", action="store_true", help="build only the single-file executable")
    ap.add_argument("--dist", default=os.path.join(ROOT, "dist"), help="output folder (default: dist/)")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "pyinstaller"),
                    help="PyInstaller's work folder (default: build/pyinstaller/)")
    ap.add_argument("--clean", action="store_true", help="empty PyInstaller's cache first")
    ap.add_argument("--no-smoke-test", action="store_true", help="do not run the built bundles' --smoke-test")
    ap.add_argument("--engine-only", action="store_true",
                    help="smoke-test the engine, the command line and the server, not the app's window")
    ap.add_argument("--max-mb", type=float, default=MAX_MB, help=f"largest folder bundle allowed (default {MAX_MB})")
    ap.add_argument("--log-level", default="WARN", help="PyInstaller's log level (default WARN)")
    args = ap.parse_args(argv)
    targets = [t for t, on in (("onedir", args.onedir), ("onefile", args.onefile)) if on] or ["onedir", "onefile"]
    dist, work = os.path.abspath(args.dist), os.path.abspath(args.work)

    problems = preflight()
    if problems:
        for p in problems:
            print(f"build_app.py: {p}", file=sys.stderr)
        return 1
    import PyInstaller
    print(f"build_app.py: Petit {version()}, PyInstaller {PyInstaller.__version__}, Python "
          f"{platform.python_version()}, {system_name()} {platform.machine()}: building {' and '.join(targets)}",
          flush=True)
    t0 = time.perf_counter()
    try:
        run_pyinstaller(targets, dist, work, write_icon(work), args.clean, args.log_level)
    except subprocess.CalledProcessError as e:
        print(f"build_app.py: PyInstaller failed (exit {e.returncode})", file=sys.stderr)
        return 1
    if "onedir" in targets and sys.platform.startswith("linux"):
        add_linux_extras(dist)
    build_seconds = time.perf_counter() - t0

    ok = True
    report = [f"build time {build_seconds:.0f} s ({' + '.join(targets)})"]
    for target in targets:
        if target == "onedir":
            path, executable = os.path.join(dist, NAME), onedir_console_executable(dist)
            if sys.platform == "darwin":
                path = os.path.join(dist, f"{NAME}.app")
        else:
            path = executable = onefile_executable(dist)
        size = du(path)
        line = f"{target}: {os.path.relpath(path, ROOT)} {mb(size)}"
        if target == "onedir" and size > args.max_mb * 1e6:
            line += f" -- OVER THE {args.max_mb:g} MB LIMIT"
            ok = False
        if not args.no_smoke_test:
            passed, seconds, last = smoke(executable, ["--engine-only"] if args.engine_only else [])
            ok = ok and passed
            line += f"; --smoke-test cold start {seconds:.1f} s: {last}"
        report.append(line)
    print("\n".join("build_app.py: " + r for r in report), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
