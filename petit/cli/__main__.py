"""`python -m petit.cli ...`: the same command line as `petit ...` (the tests run this checkout's CLI so)."""
import sys

from petit.cli import main

sys.exit(main())
