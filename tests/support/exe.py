"""The ``fleetwatch`` console script the tests run: the one installed beside the interpreter
running them (the project's venv)."""
from __future__ import annotations

import os
import sys

FLEETWATCH = os.path.join(os.path.dirname(sys.executable), "fleetwatch")
