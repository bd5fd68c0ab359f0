"""``gramagent models list`` (issue 33 item 8): a server's ``GET /v1/models`` (the scripted
server on 127.0.0.1), or the embedded runtime's packaged models."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import run_gramagent

from gramagent._models.weights import known_weights
from gramagent.testing import ScriptedServer


def test_the_models_a_server_offers(tmp_path: Path) -> None:
    with ScriptedServer(models=("gpt-small", "gpt-large")) as srv:
        text = run_gramagent("models", "list", "--base-url", srv.base_url, cwd=tmp_path)
        as_json = run_gramagent("models", "list", "--json", cwd=tmp_path,
                                env={"OPENAI_BASE_URL": srv.base_url})
    assert text.returncode == 0, text.stderr
    assert text.stdout == "openai/gpt-small\nopenai/gpt-large\n"
    assert json.loads(as_json.stdout) == {"base_url": srv.base_url,
                                          "models": ["gpt-small", "gpt-large"]}


def test_a_server_that_is_not_there_is_one_error_line(tmp_path: Path) -> None:
    done = run_gramagent("models", "list", "--base-url", "http://127.0.0.1:9/v1",
                         cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("ConfigurationError: http://127.0.0.1:9/v1/models: cannot "
                                  "reach the server")
    assert len(done.stderr.splitlines()) == 1


def test_the_embedded_runtimes_models(tmp_path: Path) -> None:
    done = run_gramagent("models", "list", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["local"]
    assert [m["name"] for m in listed] == list(known_weights())
    for model in listed:
        assert model["size"] == known_weights()[model["name"]].size
        assert model["install"].startswith("pip install ")
    text = run_gramagent("models", "list", cwd=tmp_path)
    for name in known_weights():
        assert f"local/{name}" in text.stdout
