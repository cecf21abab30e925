"""Short human text shared by projections and the CLI (pure)."""
from __future__ import annotations


def age(seconds: float | None) -> str:
    """``42s``, ``7m``, ``3h05m``, ``2d``; ``-`` when unknown. Negative ages read as 0s."""
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d"
