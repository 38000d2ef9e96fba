"""The plan's vocabulary (members, settings, unit memory) and the planner that sizes a portfolio from the engines."""
