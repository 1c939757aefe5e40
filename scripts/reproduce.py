"""`python scripts/reproduce.py ...` from a checkout, installed or not: the same as
`kanx-reproduce ...` (kanx/reproduce.py, which `make reproduce-tables` runs)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # kanx from this checkout, installed or not
from kanx.reproduce import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
