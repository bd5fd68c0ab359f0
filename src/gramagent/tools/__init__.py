"""Built-in tool implementations."""
