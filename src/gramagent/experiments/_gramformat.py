"""The canonical form of experiment files (what ``gramagent fmt`` prints for one).

An experiment file is checked as far as it speaks for itself
(:func:`~gramagent.experiments._gramfile.check_experiment_text`: syntax, keys, values,
variants, evaluators; not the agent and dataset it names, which ``gramagent check`` reads),
then written from its syntax by :func:`gramagent._spec.gram.patterns.write_patterns` in the
style of agent files, its keys in the documented order, every comment kept::

    // A/B experiment
    [greetings_ab:Experiment {
      agent: "hello.gram",
      cases: "cases.jsonl",
      baseline: "formal"  // the others are compared with it
    } |
      [formal:Variant {library: "greeters:formal", settings: {temperature: 0}}],
      [casual:Variant {library: "greeters:casual"}],
      [says_hello:Evaluator {kind: "regex", pattern: "\\\\bhello\\\\b", ignore_case: true}]
    ]

Reading the formatted text gives the same experiment (``load_experiment``), and formatting
it again changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from gramagent._spec.gram.comments import collect_comments
from gramagent._spec.gram.patterns import write_patterns
from gramagent._spec.gram.syntax import Decoder, parse, source_bytes
from gramagent._spec.gram.text import Formatted, dropped_comments
from gramagent.errors import Diagnostic, ExperimentError, SpecError
from gramagent.experiments._gramfile import KEY_ORDERS, check_experiment_text

__all__ = ["format_experiment", "format_experiment_file"]


def format_experiment(text: str | bytes, *, file: str | None = None) -> Formatted:
    """The canonical text of an experiment file's text, keeping its comments.

    Raises:
        ExperimentError: The text has problems of its own (nothing is formatted).
    """
    try:
        src = source_bytes(text, file)
    except SpecError as exc:
        raise ExperimentError(exc.diagnostics) from None
    check_experiment_text(src, file)
    tree = parse(src)
    comments = None
    if b"//" in src:
        comments = collect_comments(tree, Decoder(src), by_position=True)
    try:
        out = write_patterns(src, tree.root_node, comments, orders=KEY_ORDERS, file=file)
    except SpecError as exc:  # not after the check; kept an ExperimentError all the same
        raise ExperimentError(exc.diagnostics) from None
    return Formatted(out, () if comments is None else dropped_comments(src, file, comments))


def format_experiment_file(path: str | os.PathLike[str]) -> Formatted:
    """:func:`format_experiment` of a file (UTF-8).

    Raises:
        ExperimentError: The file cannot be read or decoded, or has problems of its own.
    """
    try:
        src = Path(path).read_bytes()
    except OSError as exc:
        raise ExperimentError([Diagnostic(f"cannot read the file: {exc.strerror or exc}",
                                          str(path))]) from None
    return format_experiment(src, file=str(path))
