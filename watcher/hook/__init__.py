"""The Claude Code hook adapter (``fleetwatch hook``): standard library only, so it starts in
milliseconds; imports nothing else of fleetwatch. Used by watcher/entry.py and the CLI."""
