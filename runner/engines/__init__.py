"""The engines: one module or package per engine, each named by its registry key (runner.planning.registry)."""
