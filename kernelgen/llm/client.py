"""Talking to an LLM: the official `openai` client against any OpenAI-compatible endpoint, a replay
backend that answers from a recorded run, and a `Session` that records every exchange and sums
its token usage.

Endpoint failures become `LLMError`s that say what happened and what to change. The openai client
already retries 408/409/429/5xx and timeouts with backoff (`max_retries`); an error reaching us has
exhausted those retries.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kernelgen.llm.config import LLMSettings
from kernelgen.errors import LLMError
from kernelgen.llm.recording import (ExchangeRecord, Recorder, ReplayMismatchWarning, load_recording,
                                     prompt_difference, safe_endpoint)
from kernelgen.fsutil import now
from kernelgen.record.usage import TokenUsage

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class ChatReply:
    text: str  # the assistant's content ("" when the model returned none)
    usage: TokenUsage  # this call only (calls=1)
    finish_reason: str | None = None
    reasoning: str | None = None  # `reasoning_content` of reasoning models, if any
    elapsed_s: float = 0.0


class ChatBackend(Protocol):
    model: str
    endpoint: str

    def complete(self, messages: Messages, purpose: str) -> ChatReply: ...


class OpenAIChat:
    """`chat.completions.create` with the configured model, limits, timeout and retries."""

    def __init__(self, settings: LLMSettings):
        from openai import OpenAI

        self.settings = settings
        self.model = settings.model
        self.endpoint = safe_endpoint(settings.base_url) or "https://api.openai.com/v1"
        # A keyless local server still needs a non-empty string: the client refuses None.
        self._key = settings.api_key.get_secret_value() if settings.api_key else ""
        self._client = OpenAI(api_key=self._key or "not-needed", base_url=settings.base_url,
                              timeout=settings.timeout_s, max_retries=settings.max_retries)

    def complete(self, messages: Messages, purpose: str) -> ChatReply:
        import openai

        t0 = time.monotonic()
        try:
            resp = self._client.chat.completions.create(
                model=self.model, messages=messages,  # type: ignore[arg-type]
                temperature=self.settings.temperature, max_tokens=self.settings.max_tokens,
            )
        except openai.APIError as e:
            raise self._explain(e) from None
        elapsed = time.monotonic() - t0
        if not getattr(resp, "choices", None):
            raise LLMError(f"{self.endpoint} answered without any choices (model {self.model!r})")
        choice = resp.choices[0]
        msg = choice.message
        # Reasoning models (DeepSeek-R1, QwQ, o-series proxies) add fields the SDK does not know;
        # they land in model_extra and are kept for review but never parsed as the answer.
        extra = getattr(msg, "model_extra", None) or {}
        reasoning = getattr(msg, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")
        u = getattr(resp, "usage", None)
        usage = TokenUsage(calls=1, prompt_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
                           completion_tokens=int(getattr(u, "completion_tokens", 0) or 0))
        return ChatReply(text=msg.content or "", usage=usage, finish_reason=choice.finish_reason,
                         reasoning=reasoning if isinstance(reasoning, str) else None, elapsed_s=elapsed)

    def _scrub(self, text: str) -> str:
        """A server may echo the key in an error message; it never reaches our output."""
        return text.replace(self._key, "****") if self._key else text

    def _explain(self, e: Exception) -> LLMError:
        import openai

        where, model = self.endpoint, self.model
        retries = f" (after {self.settings.max_retries} retries)" if self.settings.max_retries else ""
        detail = self._scrub(_server_message(e))
        if isinstance(e, openai.APITimeoutError):
            return LLMError(f"the request to {where} timed out after {self.settings.timeout_s:g} s{retries}",
                            hint="raise the limit with --llm-timeout, KERNELGEN_LLM_TIMEOUT or `timeout` in the config file, or check that the server is not overloaded")
        if isinstance(e, openai.APIConnectionError):
            cause = self._scrub(str(e.__cause__ or e))
            return LLMError(f"cannot connect to {where}: {cause}{retries}",
                            hint="check that the server is running and that OPENAI_BASE_URL / --base-url is right (most servers want it to end in /v1)")
        if isinstance(e, openai.AuthenticationError):
            return LLMError(f"{where} rejected the API key (401 Unauthorized): {detail}",
                            hint="set a valid key in OPENAI_API_KEY or KERNELGEN_API_KEY (or `api_key` in the config file)")
        if isinstance(e, openai.PermissionDeniedError):
            return LLMError(f"{where} refused access to model {model!r} (403 Forbidden): {detail}",
                            hint="check that this key may use this model")
        if isinstance(e, openai.NotFoundError):
            return LLMError(f"model {model!r} not found at {where} (404): {detail}",
                            hint="choose a model the server serves with --model or KERNELGEN_MODEL; "
                                 "if the model is right, the base URL's path may be (most servers want /v1)")
        if isinstance(e, openai.RateLimitError):
            quota = "quota" in detail.lower()
            return LLMError(f"{where} is rate limiting requests (429){retries}: {detail}",
                            hint="the account's quota is used up" if quota else
                            "wait and run the same command again, or raise --max-retries (KERNELGEN_MAX_RETRIES)")
        if isinstance(e, openai.BadRequestError):
            return LLMError(f"{where} refused the request (400): {detail}",
                            hint="a prompt beyond the model's context or a max_tokens above its limit are the usual causes; lower KERNELGEN_MAX_TOKENS")
        if isinstance(e, openai.APIStatusError):
            if e.status_code >= 500:
                return LLMError(f"{where} failed with a server error ({e.status_code}){retries}: {detail}",
                                hint="the endpoint is having trouble; run the same command again later")
            return LLMError(f"{where} answered {e.status_code}: {detail}")
        return LLMError(f"the request to {where} failed: {self._scrub(str(e))}")


def _server_message(e: Exception) -> str:
    body: Any = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(e, "message", "") or e)


class ReplayChat:
    """Answers from a recorded `llm/` folder, in order, with no endpoint: a rerun of a recorded
    generation gives the same kernels, so a run can be reproduced and reviewed.

    Each prompt is compared with the recorded one. `mismatch="warn"` (the default) goes on and
    issues a ReplayMismatchWarning naming the exchange and summarising the difference (measured
    numbers differ from run to run, so optimization prompts often do); `"refuse"` stops with an
    LLMError instead."""

    def __init__(self, folder: Path, *, mismatch: str = "warn"):
        # Failed requests were never answered; the run that recorded them went on (or stopped) anyway.
        self.records = [(p, r) for p, r in load_recording(folder) if r.error is None and r.reply is not None]
        self.folder = Path(folder)
        self.model = self.records[0][1].model if self.records else "replay"
        self.endpoint = f"replay:{self.folder}"
        self.mismatch = mismatch
        self._next = 0
        self.last_source: str | None = None
        self.last_mismatch: str | None = None

    def complete(self, messages: Messages, purpose: str) -> ChatReply:
        if self._next >= len(self.records):
            raise LLMError(f"the recording in {self.folder} has {len(self.records)} replies and this run asked for more",
                           hint="the run went differently from the recorded one (e.g. a kernel that passed then fails now)")
        path, rec = self.records[self._next]
        difference = prompt_difference(rec.messages, messages)
        if difference is not None:
            what = f"replay: this run's {purpose} prompt differs from the recorded exchange {path.name}: {difference}"
            if self.mismatch == "refuse":
                raise LLMError(what, hint="the run went differently from the recorded one; "
                                          "--replay-mismatch warn replays the recorded replies anyway")
            warnings.warn(what, ReplayMismatchWarning, stacklevel=2)
        self._next += 1
        self.last_source = str(path)
        self.last_mismatch = difference
        return ChatReply(text=rec.reply or "", usage=rec.usage, finish_reason=rec.finish_reason,
                         reasoning=rec.reasoning, elapsed_s=0.0)


class Session:
    """One operator's conversation partner: every exchange recorded under `<op>/llm/`, token usage
    summed. `usage` is the running total; callers diff it to get a round's share."""

    def __init__(self, backend: ChatBackend, record_dir: Path | None):
        self.backend = backend
        self.recorder = Recorder(record_dir) if record_dir is not None else None
        self.usage = TokenUsage()

    @property
    def model(self) -> str:
        return self.backend.model

    def chat(self, messages: Messages, purpose: str) -> ChatReply:
        started = now()
        t0 = time.monotonic()
        index = self.recorder.next_index() if self.recorder else 0
        try:
            reply = self.backend.complete(messages, purpose)
        except LLMError as e:
            self._record(ExchangeRecord(index=index, purpose=purpose, model=self.model, endpoint=self.backend.endpoint,
                                        started_at=started, elapsed_s=time.monotonic() - t0, messages=messages,
                                        error=str(e)))
            raise
        self.usage = self.usage.add(reply.usage)
        self._record(ExchangeRecord(
            index=index, purpose=purpose, model=self.model, endpoint=self.backend.endpoint, started_at=started,
            elapsed_s=reply.elapsed_s or (time.monotonic() - t0), messages=messages, reply=reply.text,
            reasoning=reply.reasoning, finish_reason=reply.finish_reason, usage=reply.usage,
            replayed_from=getattr(self.backend, "last_source", None),
            replay_mismatch=getattr(self.backend, "last_mismatch", None),
        ))
        return reply

    def _record(self, record: ExchangeRecord) -> None:
        if self.recorder is not None:
            self.recorder.write(record)
