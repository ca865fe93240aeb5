"""Whether Qt can start and open a window here, checked before it tries. On Linux, PySide6's wheels bring Qt but
not the system libraries Qt links: QtGui and QtWidgets need GL, EGL, GLib, D-Bus, fontconfig and freetype on every
start (offscreen too), and Qt's xcb platform plugin, under X11, needs a dozen more that a fresh Debian or Ubuntu may
lack (libxcb-icccm4, libxcb-keysyms1, libxcb-cursor0...). Without them the import fails with one library's name, or
Qt aborts with a message that names another package; the app names every missing library and the command that
installs them instead (checked on a fresh Debian 12: see README).

QT_LIBRARIES: what libQt6Gui / libQt6Widgets link from the system; XCB_LIBRARIES: what plugins/platforms/libqxcb.so
adds (`ldd` on PySide6 6.11); each with its Debian/Ubuntu package. macOS and Windows wheels of PySide6 bundle
everything: nothing is checked there."""
import ctypes
import os
import sys

QT_LIBRARIES = (("libglib-2.0.so.0", "libglib2.0-0"), ("libdbus-1.so.3", "libdbus-1-3"), ("libGL.so.1", "libgl1"),
                ("libEGL.so.1", "libegl1"), ("libfontconfig.so.1", "libfontconfig1"),
                ("libfreetype.so.6", "libfreetype6"), ("libX11.so.6", "libx11-6"), ("libxcb.so.1", "libxcb1"),
                ("libxkbcommon.so.0", "libxkbcommon0"))
XCB_LIBRARIES = (("libX11-xcb.so.1", "libx11-xcb1"), ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
                 ("libxcb-cursor.so.0", "libxcb-cursor0"), ("libxcb-icccm.so.4", "libxcb-icccm4"),
                 ("libxcb-util.so.1", "libxcb-util1"), ("libxcb-image.so.0", "libxcb-image0"),
                 ("libxcb-keysyms.so.1", "libxcb-keysyms1"), ("libxcb-randr.so.0", "libxcb-randr0"),
                 ("libxcb-render-util.so.0", "libxcb-render-util0"), ("libxcb-render.so.0", "libxcb-render0"),
                 ("libxcb-shm.so.0", "libxcb-shm0"), ("libxcb-sync.so.1", "libxcb-sync1"),
                 ("libxcb-xfixes.so.0", "libxcb-xfixes0"), ("libxcb-shape.so.0", "libxcb-shape0"),
                 ("libxcb-xkb.so.1", "libxcb-xkb1"))


def _loadable(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def uses_xcb(environ=None, qt_args=(), platform: str | None = None) -> bool:
    """Whether Qt will use its xcb plugin: Linux with an X display, no other platform asked for (QT_QPA_PLATFORM,
    -platform) and no Wayland session (there Qt picks its wayland plugin)."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux") or "-platform" in qt_args:
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.startswith("xcb")
    return bool(environ.get("DISPLAY")) and not environ.get("WAYLAND_DISPLAY")


def missing_libraries(libraries, loadable=None) -> list[tuple[str, str]]:
    """(library, Debian package) of each of `libraries` that cannot be loaded."""
    loadable = loadable or _loadable
    return [(lib, package) for lib, package in libraries if not loadable(lib)]


def window_problem(environ=None, qt_args=(), platform: str | None = None, loadable=None) -> str | None:
    """The sentence to print instead of letting Qt fail, or None when it can start (or it is not ours to check)."""
    platform = sys.platform if platform is None else platform
    if getattr(sys, "frozen", False) or not platform.startswith("linux"):
        return None                      # the bundled app carries these libraries itself (build_app.py)
    libraries = QT_LIBRARIES + (XCB_LIBRARIES if uses_xcb(environ, qt_args, platform) else ())
    missing = missing_libraries(libraries, loadable)
    if not missing:
        return None
    return (f"Petit cannot open its window: missing system libraries {', '.join(lib for lib, _ in missing)} — on "
            f"Debian/Ubuntu: sudo apt-get install {' '.join(package for _, package in missing)}")
