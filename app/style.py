"""Style sheets: message bubbles (the user's tinted; a light and a dark set) and the status bar's spacing. Colours
stay few, and
each sheet is set only on the widget it styles (a window-wide sheet makes every widget slower to paint), so the
platform's own style shows through everywhere else."""

MESSAGE_STYLE = """
QFrame#userMessage { background: #e9f0fb; border: 1px solid #c9d8f0; border-radius: 8px; }
QFrame#assistantMessage { background: #ffffff; border: 1px solid #dddddd; border-radius: 8px; }
QFrame#userMessage QLabel, QFrame#assistantMessage QLabel { background: transparent; border: none; }
"""

MESSAGE_STYLE_DARK = """
QFrame#userMessage { background: #24344d; border: 1px solid #34496b; border-radius: 8px; }
QFrame#assistantMessage { background: #262626; border: 1px solid #3a3a3a; border-radius: 8px; }
QFrame#userMessage QLabel, QFrame#assistantMessage QLabel { background: transparent; border: none; }
"""

STATUS_STYLE = """
QStatusBar QLabel { padding: 0px 6px; }
QStatusBar::item { border: none; }
"""
