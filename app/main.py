"""`petit-app [MODEL]` and `python -m app [MODEL]`: open the main window with MODEL (default: the last model
used, else the bundled one) loaded, so a new user can type at once."""
import argparse
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(prog="petit-app", description="The Petit desktop app: chat with small language "
                                                              "models on your CPU.")
    p.add_argument("model", nargs="?", help="a .petit or GGUF file, or a Hugging Face model folder, to open")
    return p.parse_known_args(argv)        # the rest (-platform, -style...) is Qt's


def create_app(argv=None):
    """The QApplication (created once), with the app's name, bundled fonts and icon."""
    from PySide6.QtWidgets import QApplication

    from app.fonts import load_fonts
    from app.icon import app_icon
    from app.paths import APP_NAME
    app = QApplication.instance()
    if app is None:
        QApplication.setApplicationName(APP_NAME)
        QApplication.setOrganizationName(APP_NAME)
        app = QApplication([sys.argv[0]] + list(argv or []))
    load_fonts(app)
    app.setWindowIcon(app_icon())
    return app


def main(argv=None) -> int:
    args, qt_args = parse_args(sys.argv[1:] if argv is None else argv)
    from app.display import window_problem
    problem = window_problem(qt_args=qt_args)   # before Qt aborts with a message naming the wrong package
    if problem:
        print(f"petit-app: {problem}", file=sys.stderr)
        return 1
    try:
        app = create_app(qt_args)
    except ImportError as e:
        print(f"petit-app: the desktop app needs PySide6 (pip install PySide6-Essentials): {e}", file=sys.stderr)
        return 1
    from app.instance import SingleInstance
    from app.paths import data_dir
    folder = data_dir()
    instance = SingleInstance(folder)
    if not instance.acquire():           # one app per data folder: the second brings the first forward
        if instance.ask_running(args.model):
            print(f"petit-app: Petit is already running with the data folder {folder}: brought its window to the "
                  f"front" + (f" to open {args.model}" if args.model else "") + ".", file=sys.stderr)
            return 0
        print(f"petit-app: Petit cannot start: {instance.holder()} is using its data folder {folder} and does not "
              f"answer. Close that Petit (or end that process) and start again.", file=sys.stderr)
        return 1
    from app.window import MainWindow
    window = MainWindow(model_path=args.model)
    window.instance = instance
    instance.activated.connect(lambda model: bring_forward(window, model))
    window.show()
    try:
        return app.exec()
    finally:
        instance.release()


def bring_forward(window, model: str | None = None) -> None:
    """Another start asked for the window: un-minimize it, raise it, give it the focus; open `model` if given."""
    from PySide6.QtCore import Qt
    window.setWindowState(window.windowState() & ~Qt.WindowState.WindowMinimized)
    window.show()
    window.raise_()
    window.activateWindow()
    if model:
        window.open_model(model)


if __name__ == "__main__":
    sys.exit(main())
