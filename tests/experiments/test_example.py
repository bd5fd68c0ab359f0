"""examples/ab runs (here on the scripted server instead of the embedded model)."""

from __future__ import annotations

from extras import require

require("experiments")

import dataclasses
from pathlib import Path

from gramagent.experiments import load_experiment, report, run_experiment
from gramagent.testing import ScriptedServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ab" / "experiment.gram"


async def test_the_ab_example_runs_and_separates_its_variants(
        tmp_path: Path, greeter_server: ScriptedServer) -> None:
    experiment = load_experiment(EXAMPLE)
    assert len(experiment.dataset) >= 20
    assert str(experiment.agent.model) == "local/qwen2.5-coder-0.5b"
    variants = tuple(dataclasses.replace(v, base_url=greeter_server.base_url)
                     for v in experiment.variants)
    summary = await run_experiment(dataclasses.replace(experiment, variants=variants),
                                   store=tmp_path / "ab.sqlite", concurrency=8)
    assert summary.ran == 2 * len(experiment.dataset)
    assert summary.warnings == ("variant 'casual': tool 'sayHello': description differs: spec "
                                "says 'Returns a friendly greeting message for the given "
                                "name', implementation says 'Greets someone informally.'",)
    result = report(summary.store)
    hello = result.comparison("casual", "says_hello")
    assert hello.discordant == (len(experiment.dataset), 0) and hello.outcome == "worse"
    assert result.comparison("casual", "called_tool").outcome == "no difference"
