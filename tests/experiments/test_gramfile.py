"""Experiment files: a good one loads; every problem of a bad one is reported, positioned."""

from __future__ import annotations

from extras import require

require("experiments")

from pathlib import Path

import pytest
from experiments_support import AGENT_GRAM, write_experiment

from gramagent.errors import ExperimentError
from gramagent.experiments import load_experiment


def test_a_good_file_loads(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, names=["ann", "bob"], base_url="http://127.0.0.1:9/v1",
                            repeats=2, extra=',\n  alpha: 0.1,\n  seed: 7,\n  baseline: "B",\n'
                            '  rate_limits: {`openai/scripted`: 50},\n  evaluator_timeout: 5')
    experiment = load_experiment(path)
    assert experiment.name == "greetings"
    assert experiment.agent.name == "greeter"
    assert [v.name for v in experiment.variants] == ["A", "B"]
    assert experiment.variants[1].library == "ab_libs:planted"
    assert [e.kind for e in experiment.evaluators] == [
        "exact", "contains", "tool_called", "no_tool_errors"]
    assert (experiment.repeats, experiment.alpha, experiment.seed, experiment.baseline_name) == (
        2, 0.1, 7, "B")
    assert dict(experiment.rate_limits) == {"openai/scripted": 50}
    assert experiment.evaluator_timeout == 5
    (tmp_path / "default").mkdir()
    assert load_experiment(write_experiment(tmp_path / "default", names=["ann"], base_url=(
        "http://127.0.0.1:9/v1"))).evaluator_timeout == 60
    assert len(list(experiment.run_keys())) == 2 * 2 * 2


def test_every_problem_of_a_bad_file_is_positioned(tmp_path: Path) -> None:
    (tmp_path / "greeter.gram").write_text(AGENT_GRAM)
    (tmp_path / "cases.jsonl").write_text('{"id": "a", "input": "hi"}\n')
    path = tmp_path / "bad.gram"
    path.write_text(
        '[greetings:Experiment {\n'                                   # 1
        '  agent: "greeter.gram",\n'                                  # 2
        '  cases: "cases.jsonl",\n'                                   # 3
        '  repeats: "two",\n'                                         # 4
        '  colour: "blue", evaluator_timeout: 0\n'                    # 5
        '} |\n'                                                       # 6
        '  [A:Variant {library: "ab_libs:polite", api: "soap"}],\n'   # 7
        '  [B:Variant {library: "ab_libs:planted", limits: {max_loops: 3, wall_time: 0}}],\n'  # 8
        '  [x:Evaluator {kind: "sometimes"}],\n'                      # 9
        '  [y:Evaluator {kind: "regex"}]\n'                           # 10
        ']\n')
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"{path}:4:12: experiment: repeats must be a positive integer")
    assert lines[1].startswith(f"{path}:5:3: experiment: unknown property 'colour'")
    assert lines[2].startswith(f"{path}:5:38: experiment: evaluator_timeout must be a "
                               "positive number of seconds")
    assert lines[3].startswith(f"{path}:7:47: variant 'A': api must be one of")
    assert lines[4].startswith(f"{path}:8:3: variant 'B': unknown limit 'max_loops'")
    assert lines[5].startswith(f"{path}:8:3: variant 'B': invalid RunLimits: wall_time must be "
                               "positive (got 0)")
    assert lines[6].startswith(f"{path}:9:16: evaluator 'x': unknown kind 'sometimes'")
    assert lines[7].startswith(f"{path}:10:16: evaluator 'y': regex needs option 'pattern'")
    assert len(lines) == 8


def test_syntax_errors_and_bad_references_are_positioned(tmp_path: Path) -> None:
    path = tmp_path / "broken.gram"
    path.write_text('[greetings:Experiment {agent: "nope.gram", cases: "cases.jsonl"} |\n'
                    '  [A:Variant {library: "m:a"}], [B:Variant {library: "m:b"}]\n]\n')
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    text = str(info.value)
    assert f"{path}:1:31: agent 'nope.gram'" in text
    assert "cases.jsonl: cannot read the dataset" in text
    path.write_text('[greetings:Experiment {agent: "x.gram" |\n]\n')
    with pytest.raises(ExperimentError, match=rf"{path}:1:\d+: "):
        load_experiment(path)
    path.write_text("[a:Agent {instruction: \"x\", model: \"openai/x\"}]\n")
    with pytest.raises(ExperimentError, match="expected an experiment"):
        load_experiment(path)


def test_bad_dataset_rows_are_reported_in_their_own_file(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, names=["ann"], base_url="http://127.0.0.1:9/v1")
    (tmp_path / "cases.jsonl").write_text('{"id": "a"}\n{"id": "b", "input": ""}\n')
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    cases = tmp_path / "cases.jsonl"
    assert str(info.value).splitlines() == [f"{cases}:1: missing input",
                                            f"{cases}:2: input must not be empty"]


@pytest.mark.parametrize("name", ["latency_ms", "tokens"])
def test_an_evaluator_cannot_take_the_name_of_the_reports_own_metric(
        tmp_path: Path, name: str) -> None:
    path = write_experiment(tmp_path, names=["ann"], base_url="http://127.0.0.1:9/v1",
                            evaluators=f'\n  [{name}:Evaluator {{kind: "latency_under", '
                                       'ms: 2000}]')
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    assert str(info.value) == (f"{path}:2:1: evaluator name {name!r} is the report's own "
                               "metric of every run; call the evaluator something else")


def test_an_evaluator_with_two_kinds_is_refused(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, names=["ann"], base_url="http://127.0.0.1:9/v1",
                            evaluators='\n  [e:Evaluator {kind: "exact", kind: "contains"}]')
    with pytest.raises(ExperimentError) as info:
        load_experiment(path)
    assert str(info.value) == f"{path}:10:32: evaluator 'e': duplicate key 'kind'"
