"""`python -m petit ...`: the same command line as `petit ...` (for a Python whose scripts folder is not on PATH)."""
import sys

from petit.cli import main

sys.exit(main())
