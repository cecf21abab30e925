"""Fault-injection drills, fuzzing, soak and storage faults (``make drills``; short versions in
``make test``). Scale with ``FW_DRILL_LONG=1``."""
