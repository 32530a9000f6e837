"""Every LLM exchange, kept under `generated/<name>/llm/` as one JSON file each
(`0001_generate.json`, `0002_repair.json`, ...): the messages sent, the reply, the token usage,
how long it took. Runs are reviewable afterwards and replayable with `--backend replay`.

What is never in a record: the API key (the client holds it; records hold only the model name and
the endpoint URL without any credentials in it).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelgen.errors import ConfigError
from kernelgen.fsutil import atomic_write
from kernelgen.record.usage import TokenUsage

LLM_DIR = "llm"
_FILE_RE = re.compile(r"^(\d{4,})_([a-z0-9_-]+)\.json$")


class ExchangeRecord(BaseModel):
    """One request and its reply (or the error that ended it)."""

    model_config = ConfigDict(extra="forbid")

    index: int
    purpose: str  # generate | repair | malformed | optimize | ...
    model: str
    endpoint: str = ""  # base URL, credentials stripped; "" for api.openai.com's default
    started_at: str
    elapsed_s: float
    messages: list[dict[str, str]]
    reply: str | None = None
    reasoning: str | None = None  # reasoning models' `reasoning_content`, kept for review
    finish_reason: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    error: str | None = None
    replayed_from: str | None = None
    replay_mismatch: str | None = None  # how this run's prompt differed from the recorded one, if it did


def safe_endpoint(url: str | None) -> str:
    """The URL without user:password@ (someone may have put a credential there)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class Recorder:
    """Appends exchange records to one folder, numbering on from what is already there (the
    optimize loop records into the same folder `kernelgen new` started)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def next_index(self) -> int:
        if not self.folder.is_dir():
            return 1
        indices = [int(m.group(1)) for p in self.folder.iterdir() if (m := _FILE_RE.match(p.name))]
        return max(indices, default=0) + 1

    def write(self, record: ExchangeRecord) -> Path:
        path = self.folder / f"{record.index:04d}_{re.sub(r'[^a-z0-9_-]', '-', record.purpose.lower())}.json"
        atomic_write(path, record.model_dump_json(indent=2))
        return path


def load_recording(folder: Path) -> list[tuple[Path, ExchangeRecord]]:
    """A recorded `llm/` folder's exchanges in order; ConfigError when it is not one."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"--replay {folder}: no such folder",
                          hint="give the llm/ folder of an earlier run, e.g. generated/broadcast/llm")
    if (folder / LLM_DIR).is_dir() and not any(_FILE_RE.match(p.name) for p in folder.iterdir()):
        folder = folder / LLM_DIR  # the operator folder was given: its llm/ is meant
    out = []
    for path in sorted(folder.iterdir()):
        if not _FILE_RE.match(path.name):
            continue
        try:
            out.append((path, ExchangeRecord.model_validate_json(path.read_text(encoding="utf-8"))))
        except ValidationError as e:
            raise ConfigError(f"{path}: not a KernelGen exchange record: {e.errors(include_url=False)[0]['msg']}") from None
    if not out:
        raise ConfigError(f"--replay {folder}: no recorded exchanges (NNNN_<purpose>.json) in it")
    return out


class ReplayMismatchWarning(UserWarning):
    """A replayed exchange whose prompt differs from the one recorded (`--replay-mismatch warn`)."""


def _clip(line: str, n: int = 100) -> str:
    line = line.strip()
    return repr(line if len(line) <= n else line[: n - 1] + "…")


def prompt_difference(recorded: list[dict[str, str]], sent: list[dict[str, str]]) -> str | None:
    """None when the prompts are the same; else a short summary: which message, how many lines
    differ, and the first differing line on each side."""
    if recorded == sent:
        return None
    if len(recorded) != len(sent):
        return f"the recording has {len(recorded)} messages, this run sends {len(sent)}"
    for i, (old, new) in enumerate(zip(recorded, sent)):
        if old == new:
            continue
        if old.get("role") != new.get("role"):
            return f"message {i + 1}: role {old.get('role')!r} recorded, {new.get('role')!r} now"
        a, b = str(old.get("content", "")).splitlines(), str(new.get("content", "")).splitlines()
        removed = added = 0
        first: tuple[str, str] | None = None
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            removed += i2 - i1
            added += j2 - j1
            if first is None:
                first = (a[i1] if i1 < i2 else "", b[j1] if j1 < j2 else "")
        where = f"message {i + 1} ({new.get('role', '?')}): {removed} line(s) recorded, {added} now differ"
        if first is not None:
            where += f"; first: recorded {_clip(first[0])}, now {_clip(first[1])}"
        return where
    return "the messages differ"
