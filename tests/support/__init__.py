"""Shared test helpers (one module per theme); test modules import from here, never from each other."""
