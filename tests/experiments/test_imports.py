"""Modules named by import path: found beside the experiment, never in place of the standard
library's."""

from __future__ import annotations

from extras import require

require("experiments")

import sys
import tempfile
import uuid
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gramagent.experiments._imports import add_search_path, import_object

# standard modules nothing here imports on its own, each safe to import
_UNUSED_STANDARD = ["colorsys", "netrc", "tabnanny", "wave", "graphlib", "sched", "mailbox",
                    "poplib", "smtplib", "imaplib", "ftplib", "calendar", "statistics"]


@settings(max_examples=len(_UNUSED_STANDARD), deadline=None)
@given(standard=st.sampled_from(_UNUSED_STANDARD))
def test_a_module_beside_the_experiment_never_shadows_the_standard_library(
        standard: str) -> None:
    user = f"user_tools_{uuid.uuid4().hex}"
    saved = sys.modules.pop(standard, None)
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / f"{standard}.py").write_text("SHADOW = True\n")
        (Path(directory) / f"{user}.py").write_text(
            f"import {standard}\nwhich = {standard}.__file__\n")
        add_search_path(directory)
        try:
            which = import_object(f"{user}:which", what="evaluator 'e':")
        finally:
            sys.path.remove(directory)
            sys.modules.pop(user, None)
            shadow = sys.modules.pop(standard, None)
            if saved is not None:
                sys.modules[standard] = saved
    assert not hasattr(shadow, "SHADOW")
    assert Path(which).parent != Path(directory)  # the user module imported the real one
