"""Take a screenshot of the main window after a short exchange with the bundled model (the last reply regenerated
once, so it shows its versions), into docs/screenshot.png.

    python scripts/screenshot.py [-o docs/screenshot.png] [--scale 1]

With no display it renders offscreen (QT_QPA_PLATFORM=offscreen); under Xvfb it shows a real window:
    xvfb-run -s "-screen 0 1400x900x24" python scripts/screenshot.py
It uses a throwaway data folder, so your own chats are neither shown nor touched.
"""
import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTIONS = ("what is 12 plus 7?", "spell cat backwards", "which is bigger, 2 or 16?")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "screenshot.png"))
    p.add_argument("--scale", type=float, default=1.0, help="QT_SCALE_FACTOR (2 = a high-DPI screen)")
    p.add_argument("--width", type=int, default=1200)
    p.add_argument("--height", type=int, default=760)
    args = p.parse_args(argv)
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["QT_SCALE_FACTOR"] = str(args.scale)
    os.environ["PETIT_DATA_DIR"] = tempfile.mkdtemp(prefix="petit-screenshot-")
    sys.path.insert(0, ROOT)

    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QCursor
    from app.main import create_app
    from app.window import MainWindow
    from petit.assets import default_model_path

    app = create_app([])
    window = MainWindow(model_path=default_model_path())
    window.resize(args.width, args.height)
    window.show()
    pending = list(QUESTIONS)
    regenerated = []

    def next_step():
        if window.chat.busy or window.models.loading or not window.chat.model_ready:
            QTimer.singleShot(50, next_step)
        elif pending:
            window.chat.send(pending.pop(0))
            QTimer.singleShot(50, next_step)
        elif not regenerated:
            regenerated.append(True)
            window.chat.regenerate()
            QTimer.singleShot(50, next_step)
        else:
            window.page.composer.set_text("what comes after C?")
            QCursor.setPos(0, 0)                 # no hover highlight under Xvfb's pointer
            QTimer.singleShot(300, shoot)

    def shoot():
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        ok = window.grab().save(args.output)
        print(f"wrote {args.output}" if ok else f"could not write {args.output}", file=sys.stderr)
        window.close()
        app.exit(0 if ok else 1)

    QTimer.singleShot(100, next_step)
    QTimer.singleShot(30000, lambda: (print("timed out", file=sys.stderr), window.close(), app.exit(1)))
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
