"""``python -m kanx.draw``: see kanx.draw.command."""

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
