"""A reply llama.cpp's chat parser rejects, on the embedded 0.5B model, for real.

The request: a JSON list of strings under a ``pattern``, the model asked for a ``//`` comment
after each item. llama.cpp's grammar for a pattern lets raw ``"`` and line breaks into a string,
so the model writes ``"Banana"\\n]\\n// Comment ... "]`` and the server's parser refuses it:
HTTP 500 "... does not match the expected peg-native format" (bench/RESULTS.md, issue 19). At
temperature 0 on one thread the model writes the same every time (about 5 s).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gramagent._models.chat import ChatCompletionsModel
from gramagent._models.local import local_model
from gramagent.errors import ModelAPIError

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BODY: dict[str, Any] = {
    "model": "qwen2.5-coder-0.5b", "temperature": 0.0, "max_tokens": 80,
    "messages": [{"role": "user", "content":
                  "Reply with a JSON list of two fruit names, and write a // comment after "
                  "each name."}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "fruits", "schema": {
        "type": "array", "items": {"type": "string", "pattern": "^[^{}]{1,40}$"}}}},
}


async def test_rejected_reply_is_generated_again_raw() -> None:
    """In native mode the server's error stands (one attempt: not retried); in constrained
    mode (as the embedded model sends), streamed or not, the reply is generated again and is
    JSON under the schema."""
    async with local_model("qwen2.5-coder-0.5b", threads=1) as model:
        server = await model.start()
        attempts: list[int | None] = []
        for stream in (False, True):
            async with ChatCompletionsModel(server.base_url, stream=stream,
                                            llama_server_root=server.root_url) as chat:
                if not stream:
                    chat.http.on_exchange = lambda request, answer, status: attempts.append(
                        status)
                    with pytest.raises(ModelAPIError, match="peg-native format") as caught:
                        await chat.post_body(dict(BODY), "native")
                    assert caught.value.status == 500
                    assert attempts == [500]
                data = await chat.post_body(dict(BODY), "constrained")
            names = json.loads(data["choices"][0]["message"]["content"])
            assert isinstance(names, list) and names
            assert all(isinstance(n, str) and "{" not in n and "}" not in n for n in names)
            assert data["choices"][0]["finish_reason"] == "stop"
