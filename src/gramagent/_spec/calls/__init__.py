"""Checking a tool call's arguments: the checks before a call runs, and the validators
compiled once per schema (with their fast path)."""
