"""The action endpoint and the phone page (`[web]`): signed links from pushes, POST-only actions.
May import runtime, config, projections and events; never the CLI or another surface."""
