"""Where `kernelgen new` writes an LLM's exchanges as they happen, so that nothing the model wrote is
lost when the command fails or is interrupted.

Round 0 runs in a staging folder that is deleted unless round 0 finishes; the exchanges are written
beside it instead, one file per request and reply the moment the reply arrives, in
`<out>/<name>.llm-unfinished-<time>/`. When round 0 finishes they move into the operator's `llm/`
and the folder goes; when it does not, the folder stays and the error says where it is.

Running the same command again reuses it (`ResumeChat`): a request that is the one recorded gets the
recorded reply, with no call to the model, until the run asks something the recording does not hold;
from there on the model is asked. The first request must be the recorded one exactly (the same spec,
prompt and device); later ones may differ in their numbers only (a repair prompt quotes values drawn
from fresh random inputs). `--backend replay --replay <folder>` replays it with no endpoint at all.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from kernelgen.fsutil import timestamp
from kernelgen.llm.client import ChatBackend, ChatReply, Messages
from kernelgen.llm.recording import ExchangeRecord, load_recording

MARK = ".llm-unfinished-"  # <name>.llm-unfinished-<time>: an unfinished run's exchanges, beside --out's operator folders
_NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class Transcript:
    """This run's exchanges (written as they happen) and an earlier unfinished run's, to reuse."""

    folder: Path
    earlier: Path | None = None
    reused: int = 0  # replies of `earlier` this run took instead of asking the model

    def count(self) -> int:
        return sum(1 for p in self.folder.glob("*.json")) if self.folder.is_dir() else 0

    def kept(self) -> str:
        """What the failure message says about it; "" when nothing was exchanged."""
        n = self.count()
        if not n:
            return ""
        return (f"the LLM's {n} exchange{'s' if n != 1 else ''} so far {'are' if n != 1 else 'is'} kept in {self.folder}: "
                f"run the same command again and it reuses {'them' if n != 1 else 'it'} (a request the recording "
                f"holds gets its recorded reply, with no call to the model), or replay with --backend replay "
                f"--replay {self.folder}; delete the folder to start afresh")

    def finish(self, dest: Path) -> None:
        """Round 0 finished: the exchanges go into the operator's `llm/` (`dest`), before the operator
        folder is renamed into place; `discard` removes this folder once it is."""
        if self.folder.is_dir():
            shutil.copytree(self.folder, dest, dirs_exist_ok=True)

    def discard(self) -> None:
        """Remove this run's folder (its exchanges are in the operator's `llm/` now) and the earlier
        run's when every reply of it was reused (each is in this run's records): nothing is lost."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.earlier is not None and self.reused >= len(answered(self.earlier)):
            shutil.rmtree(self.earlier, ignore_errors=True)


def answered(folder: Path) -> list[tuple[Path, ExchangeRecord]]:
    """The recorded exchanges that got a reply (a failed request has nothing to reuse)."""
    try:
        return [(p, r) for p, r in load_recording(folder) if r.error is None and r.reply is not None]
    except Exception:  # noqa: BLE001 - a damaged or empty folder holds nothing to reuse
        return []


def unfinished(out_root: Path, name: str) -> list[Path]:
    """Earlier unfinished runs' folders for this operator, newest first."""
    root = Path(out_root)
    if not root.is_dir():
        return []
    return sorted((p for p in root.glob(f"{name}{MARK}*") if p.is_dir()), key=lambda p: p.name, reverse=True)


def start_transcript(out_root: Path, name: str, *, resume: bool) -> Transcript:
    """A fresh folder for this run; with `resume`, the newest earlier unfinished run that has replies."""
    earlier = next((p for p in unfinished(out_root, name) if answered(p)), None) if resume else None
    folder = Path(out_root) / f"{name}{MARK}{timestamp()}"
    n = 1
    while folder.exists() or folder == earlier:
        n += 1
        folder = Path(out_root) / f"{name}{MARK}{timestamp()}-{n}"
    return Transcript(folder=folder, earlier=earlier)


def same_request(recorded: ExchangeRecord, messages: Messages, purpose: str, *, first: bool) -> bool:
    """Whether a recorded reply answers this request: the same purpose, and the same messages —
    exactly for the first request, apart from numbers for later ones."""
    if recorded.purpose != purpose or len(recorded.messages) != len(messages):
        return False
    if first:
        return recorded.messages == messages

    def masked(ms: Messages) -> list[tuple[str, str]]:
        return [(m.get("role", ""), _NUMBER_RE.sub("#", str(m.get("content", "")))) for m in ms]

    return masked(recorded.messages) == masked(messages)


class ResumeChat:
    """Answers from an earlier unfinished run while this run asks what it asked, then from `live`.

    `last_source` names the recorded file a reply came from (None for a live one): the session writes
    it into the new record's `replayed_from`, so the record tells which replies were paid for once."""

    def __init__(self, live: ChatBackend, folder: Path):
        self.live = live
        self.records = answered(folder)
        self.model, self.endpoint = live.model, live.endpoint
        self._next: int | None = 0  # None: the run went its own way; every request goes to the model
        self.reused = 0
        self.last_source: str | None = None

    def complete(self, messages: Messages, purpose: str) -> ChatReply:
        if self._next is not None and self._next < len(self.records):
            path, rec = self.records[self._next]
            if same_request(rec, messages, purpose, first=self._next == 0):
                self._next += 1
                self.reused += 1
                self.last_source = str(path)
                return ChatReply(text=rec.reply or "", usage=rec.usage, finish_reason=rec.finish_reason,
                                 reasoning=rec.reasoning, elapsed_s=0.0)
            self._next = None
        self.last_source = None
        return self.live.complete(messages, purpose)
