"""The declarative spec language: agents, tool specs, type signatures, JSON Schema."""
