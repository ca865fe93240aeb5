"""`python -m app`: the Petit desktop app."""
import sys

from app.main import main

sys.exit(main())
