"""The multi-host room: the NATS JetStream forwarder (inside `fleetwatch run`) and the hub (`fleetwatch hub`).
May import runtime, config, projections and events; never the CLI or another surface."""
