"""Execution: tool binding, the agent loop, events."""
