"""An honest time-remaining column for runs that finish in bursts (A/B experiments).

rich's ``TimeRemainingColumn`` divides what is left by the speed of the last 30 seconds. An
experiment's runs take minutes each on the embedded model and finish a few at a time, so that
window mostly holds one burst: through an 11.5-minute run its estimate stayed between 0:16
and 1:08. This column divides by the mean rate since the command started instead: the time
taken per run finished so far (runs already in the store when it started, resumed, are left
out), times the runs left.
"""

from __future__ import annotations

from datetime import timedelta

from rich.progress import ProgressColumn, Task
from rich.text import Text

__all__ = ["MeanRateRemainingColumn", "remaining_seconds"]


def remaining_seconds(elapsed: float | None, completed: float, total: float | None,
                      resumed: float = 0) -> float | None:
    """Seconds left at the mean rate so far: ``elapsed`` seconds for the ``completed -
    resumed`` runs finished since the start; None while nothing has finished (or the total
    is unknown)."""
    done = completed - resumed
    if elapsed is None or total is None or done <= 0:
        return None
    return max(0.0, elapsed / done * (total - completed))


class MeanRateRemainingColumn(ProgressColumn):
    """Time remaining at the mean rate since the start (the task's ``resumed`` field: runs
    that were done before it started)."""

    def render(self, task: Task) -> Text:
        """``H:MM:SS`` left, or ``-:--:--`` while no run has finished."""
        left = remaining_seconds(task.elapsed, task.completed, task.total,
                                 float(task.fields.get("resumed", 0)))
        if left is None:
            return Text("-:--:--", style="progress.remaining")
        return Text(str(timedelta(seconds=round(left))), style="progress.remaining")
