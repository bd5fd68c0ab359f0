"""JSON Schema from outside and for the model: the check of a schema that comes from outside,
strict-mode compilation, and the nulls a strict model sends."""
