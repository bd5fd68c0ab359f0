"""The LLM judge: a model grades an answer against a rubric, as a score in [0, 1].

The judge is asked for a JSON object ``{"score": <0..1>, "reason": "..."}``; the first such
object in its reply counts (a small model may wrap it in prose or a code fence). A reply with
none scores 0 with the reply quoted as the reason. Any model works, the embedded
``local/...`` ones included; the model is resolved on first use and closed with the judge.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import orjson

from gramagent import Model, ModelRef, ModelRequest, UserMessage, resolve_model
from gramagent.errors import GramagentError
from gramagent.experiments._cases import Case
from gramagent.experiments._records import EvalResult, RunRecord

__all__ = ["Judge", "read_verdict"]

JUDGE_INSTRUCTION = (
    "You grade an assistant's answer against a rubric. Reply with only a JSON object: "
    '{"score": <a number from 0 to 1>, "reason": "<one short sentence>"}.'
)
_OBJECT = re.compile(r"\{[^{}]*\}", re.S)


class Judge:
    """An evaluator asking ``model`` to grade each answer by ``rubric``."""

    def __init__(self, name: str, *, model: str, rubric: str, api: str | None = None,
                 base_url: str | None = None, pass_score: float | None = None) -> None:
        self.name = name
        self.ref = ModelRef.parse(model)
        self.rubric = rubric
        self.api = api
        self.base_url = base_url
        self.pass_score = pass_score
        """When given, the judge is pass/fail: a score at or above it passes (the verdict scores
        1 or 0; the judge's score is quoted in its reason)."""
        self._model: Model | None = None
        self._lock = asyncio.Lock()

    async def _get_model(self) -> Model:
        async with self._lock:
            if self._model is None:
                self._model = resolve_model(self.ref, api=self.api, base_url=self.base_url)
            return self._model

    async def __call__(self, case: Case, record: RunRecord) -> EvalResult:
        if record.answer is None:
            return self._result(0.0, f"no answer ({record.stop})")
        expected = orjson.dumps(dict(case.expected)).decode() if case.expected else "(none)"
        prompt = (f"Rubric: {self.rubric}\n\nUser message: {case.input}\n\nExpected: "
                  f"{expected}\n\nAnswer to grade: {record.answer}")
        model = await self._get_model()
        try:
            turn = await model.request(ModelRequest(
                model=self.ref.name, instruction=JUDGE_INSTRUCTION,
                messages=[UserMessage(content=prompt)], settings={"temperature": 0}))
        except GramagentError as exc:
            return self._result(0.0, f"judge failed: {type(exc).__name__}: {exc}"[:300])
        score, reason = read_verdict(turn.text or "")
        return self._result(score, reason)

    def _result(self, score: float, reason: str) -> EvalResult:
        if self.pass_score is None:
            return EvalResult(name=self.name, score=score, passed=None, reason=reason)
        # pass/fail: scored 1 or 0 like every pass/fail verdict (rates count scores of 1);
        # the judge's own score stays in the reason
        passed = score >= self.pass_score
        return EvalResult(name=self.name, score=float(passed), passed=passed,
                          reason=f"score {score:g}: {reason}")

    async def aclose(self) -> None:
        model, self._model = self._model, None
        if model is not None:
            await model.aclose()


def read_verdict(text: str) -> tuple[float, str]:
    """The score (clamped to [0, 1]) and reason of a judge's reply; 0 when unreadable."""
    for match in _OBJECT.finditer(text):
        try:
            data: Any = orjson.loads(match.group(0))
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("score"), (int, float)) and not (
                isinstance(data.get("score"), bool)):
            score = min(1.0, max(0.0, float(data["score"])))
            return score, str(data.get("reason", ""))[:500]
    return 0.0, f"unreadable judge reply: {text[:200]!r}"
