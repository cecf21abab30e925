"""The long-running process: the tick loop, projection state, the notifier worker, sd_notify and
logging setup. Imports config, sources, projections and events; never the CLI or a surface."""
