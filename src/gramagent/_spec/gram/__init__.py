"""Gram text: reading it into spec objects and writing them back (syntax, comments, layout).

:mod:`.text` holds the entry points (``load_gram``, ``to_gram``, ``format_gram``); the readers
and writers beside it do the work. Nothing is imported here, so that reading one helper (a
writer's literals) does not load the tree-sitter parser.
"""
