"""From configuration to a conversation: `prepare` validates the LLM settings before anything is
written (ConfigError, exit 2, says what to set), `connect` opens a recording session on them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgen.errors import ConfigError
from kernelgen.llm.client import ChatBackend, OpenAIChat, ReplayChat, Session
from kernelgen.llm.config import LLMSettings, load_settings, require_endpoint
from kernelgen.llm.recording import LLM_DIR, load_recording
from kernelgen.llm.transcript import ResumeChat


@dataclass(frozen=True)
class LLMSetup:
    """A validated LLM configuration and the backend that uses it: what `prepare` returns and `connect` uses."""

    backend: str  # openai | replay
    settings: LLMSettings
    replay_dir: Path | None = None

    @property
    def repairs(self) -> int:
        return self.settings.repairs

    @property
    def candidates(self) -> int:
        return self.settings.candidates


def prepare(backend: str, options: dict[str, Any]) -> LLMSetup:
    """Validate the configuration before anything is written; ConfigError (exit 2) says what to set.
    options: model, base_url, temperature, max_tokens, timeout_s, max_retries, repairs, candidates,
    replay_mismatch (command-line values, highest precedence) and replay (the recorded folder, for
    --backend replay)."""
    if backend not in {"openai", "replay"}:
        raise ConfigError(f"backend {backend!r} does not use an LLM")
    settings = load_settings({k: v for k, v in options.items() if k != "replay"})
    if backend == "replay":
        folder = options.get("replay")
        if not folder:
            raise ConfigError("--backend replay needs --replay DIR: the llm/ folder of a recorded run",
                              hint="e.g. --replay generated/broadcast/llm")
        load_recording(Path(folder))  # a bad folder fails now, not after the files are written
        return LLMSetup(backend="replay", settings=settings, replay_dir=Path(folder))
    return LLMSetup(backend="openai", settings=require_endpoint(settings))


def connect(setup: LLMSetup, op_path: Path, *, record_dir: Path | None = None, resume_from: Path | None = None) -> Session:
    """A session that records into `record_dir` (default `<op_path>/llm/`, numbering on from what is
    there). `resume_from`: an unfinished run's exchanges, whose replies answer the same requests before
    the endpoint is asked (kernelgen.llm.transcript)."""
    backend: ChatBackend
    if setup.backend == "replay" and setup.replay_dir:
        backend = ReplayChat(setup.replay_dir, mismatch=setup.settings.replay_mismatch)
    else:
        backend = OpenAIChat(setup.settings)
        if resume_from is not None:
            backend = ResumeChat(backend, resume_from)
    return Session(backend, Path(record_dir) if record_dir is not None else Path(op_path) / LLM_DIR)
