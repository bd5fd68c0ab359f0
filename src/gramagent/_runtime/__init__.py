"""Execution: tool binding (``library``), the agent loop (``loop``), limits, events and
metrics. Private: the public names are re-exported by :mod:`gramagent`."""
