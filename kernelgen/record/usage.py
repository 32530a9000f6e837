"""Token usage of LLM calls: per call, summed per round and per operator (the log and the report show it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TokenUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: "TokenUsage") -> "TokenUsage":
        return TokenUsage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )

    def minus(self, earlier: "TokenUsage") -> "TokenUsage":
        """What was spent since `earlier` (a running total's snapshot)."""
        return TokenUsage(calls=self.calls - earlier.calls, prompt_tokens=self.prompt_tokens - earlier.prompt_tokens,
                          completion_tokens=self.completion_tokens - earlier.completion_tokens)
