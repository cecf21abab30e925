"""The systemd --user units and first-run files: rendering, installing and the default config.
Imports events.errors only; used by the CLI (install-service, init, doctor)."""
