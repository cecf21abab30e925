"""``fleetwatch demo``: a scripted fleet (world.py) and the narrated tour over it (show.py). Runs
the real watcher as a subprocess; imports events for reading the log, nothing from the CLI."""
