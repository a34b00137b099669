"""The toolbox: the tool protocol, the registry, the orchestrator that runs each call, approval and hooks."""
