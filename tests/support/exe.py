"""The ``fleetwatch`` console script the tests run: the one installed beside the interpreter
running them (the project's venv)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]   # tests/
ROOT = TESTS.parent                           # the checkout
FIXTURES = TESTS / "fixtures"

FLEETWATCH = os.path.join(os.path.dirname(sys.executable), "fleetwatch")
