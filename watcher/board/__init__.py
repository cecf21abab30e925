"""`fleetwatch board`: the live terminal board (Textual). It follows the event log and shows the
projections' views (the same code `status` uses), never reads sources of its own.

May import runtime, config, projections and events; never the CLI or another surface.
"""
