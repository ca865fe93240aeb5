"""The lint configuration in pyproject.toml ([tool.ruff]) holds for the whole tree: pyflakes' unused and undefined
names, pycodestyle's errors and warnings, lines of at most 120 characters. ruff is a test dependency
(pip install -e ".[test]"), so this runs wherever the suite does."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout.strip()) == (0, "All checks passed!"), r.stdout + r.stderr
