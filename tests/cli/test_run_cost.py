"""``--price MODEL=IN,OUT`` on run and chat: each reply's cost from the tokens the server
reported, on stderr (``cost_usd`` with ``--json``); no price, no cost; a price of another model
or of a bad form is one error line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gramagent._cli import app
from gramagent.testing import ScriptedServer, reply

HELLO = Path(__file__).resolve().parents[2] / "examples" / "hello_world.gram"
_FIGURES = st.floats(0, 100, allow_nan=False).map(lambda f: round(f, 4))


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("GRAMAGENT_DATA_DIR", str(tmp_path))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens_in=st.integers(0, 10**7), tokens_out=st.integers(0, 10**6),
       price_in=_FIGURES, price_out=_FIGURES, by_name=st.booleans())
@pytest.mark.slow
def test_the_cost_of_a_reply(tokens_in: int, tokens_out: int, price_in: float,
                             price_out: float, by_name: bool) -> None:
    model = "gpt-4o-mini" if by_name else "openai/gpt-4o-mini"
    usage = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    with ScriptedServer([reply("Hi.", usage), reply("Hi.", usage)]) as server:
        base = ["run", str(HELLO), "hi", "--base-url", server.base_url,
                "--model", "openai/gpt-4o-mini", "--price", f"{model}={price_in},{price_out}"]
        data = json.loads(CliRunner().invoke(app, [*base, "--json"]).stdout)
        text = CliRunner().invoke(app, base)
    expected = (tokens_in * price_in + tokens_out * price_out) / 1_000_000
    assert math.isclose(data["cost_usd"], expected, rel_tol=1e-12, abs_tol=1e-15)
    assert text.exit_code == 0 and text.stdout.strip() == "Hi."
    assert f"cost: ${expected:.6g}" in text.stderr and f"{tokens_in:,} input" in text.stderr


def test_no_price_no_cost() -> None:
    with ScriptedServer([reply("Hi.", {"input_tokens": 5, "output_tokens": 2})]) as server:
        result = CliRunner().invoke(app, ["run", str(HELLO), "hi", "--base-url",
                                          server.base_url, "--model", "openai/m", "--json"])
    assert result.exit_code == 0 and "cost_usd" not in json.loads(result.stdout)
    assert "cost" not in result.stderr


@pytest.mark.parametrize(("price", "says"), [
    ("openai/m=1", "expected MODEL=IN,OUT"), ("openai/m=-1,2", "expected MODEL=IN,OUT"),
    ("openai/m=nan,1", "expected MODEL=IN,OUT"), ("other=1,2", "not the model of this run")])
def test_a_bad_or_unrelated_price_is_one_error_line(price: str, says: str) -> None:
    with ScriptedServer([reply("Hi.")]) as server:
        result = CliRunner().invoke(app, ["run", str(HELLO), "hi", "--base-url",
                                          server.base_url, "--model", "openai/m",
                                          "--price", price])
    assert result.exit_code == 1 and says in result.stderr
    assert "Traceback" not in result.output
