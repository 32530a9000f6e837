"""A Ray task's operator folder sent back to the driver after every finished round, not only at the
end of the task.

A task whose worker dies mid-operator (killed, out of memory, its node lost) returns nothing, and its
scratch folder lies on a node the driver may not reach. With a copy after each round, the driver's
`--out` holds the operator as of its last finished round, which the next run resumes like a local
one (kernelgen.batch.resume). The job's log travels with each copy, so the driver keeps it too.

A copy is taken only when `state.json` says a round finished that the last copy did not have, and
kept only if `state.json` did not change while it was packed: a copy never holds a round that its
state does not count, nor a state whose round it lacks. A round already under way may be in it
half-done; `optimize` moves such a round aside and redoes it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from kernelgen.batch import artifacts
from kernelgen.record.state import STATE_FILE, load_state

POLL_S = 1.0  # a stat of state.json a second; a round takes seconds (interpreter) to minutes (GPU)

Send = Callable[[bytes, str, str], None]  # (folder, log text since the last copy, what the copy holds)


class FolderShipper:
    """Watches one operator folder under `root` in a task's scratch space and sends a copy through
    `send` whenever a round finished; `final()` gives what is left to send when the job is done."""

    def __init__(self, root: Path, name: str, log: Path, send: Send):
        self.root, self.name, self.log, self.send = Path(root), name, Path(log), send
        self._log_sent = 0
        self._aside_sent: set[str] = set()  # copies moved aside (`<name>.previous-*`): sent once, never changed
        self._stamp: tuple[int, int] | None = None
        self._rounds = self._finished_rounds()  # what the driver sent: it has those already
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def _state(self) -> Path:
        return self.root / self.name / STATE_FILE

    def _finished_rounds(self) -> tuple[str, tuple[int, ...]]:
        """The operator (its creation time: `new --force` makes another) and its finished rounds."""
        try:
            state = load_state(self.root / self.name)
        except (OSError, ValueError):
            return "", ()
        return state.created_at, tuple(sorted(r.round for r in state.rounds if r.finished_at))

    def _state_bytes(self) -> bytes | None:
        try:
            return self._state.read_bytes()
        except OSError:
            return None

    def _log_since(self) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(self._log_sent)
                data = f.read()
        except OSError:
            return ""
        self._log_sent += len(data)
        return data.decode("utf-8", errors="replace")

    def _entries(self) -> list[str]:
        return [e for e in artifacts.operator_entries(self.root, self.name) if e not in self._aside_sent]

    def poll(self) -> bool:
        """Send a copy if a round finished since the last one; True if one was sent."""
        try:
            st = self._state.stat()
        except OSError:
            return False
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return False
        rounds = self._finished_rounds()
        if not rounds[1] or rounds == self._rounds:
            self._stamp = stamp
            return False
        before = self._state_bytes()
        entries = self._entries()
        try:
            data = artifacts.pack(self.root, entries)
        except OSError:  # a file replaced while it was read: the next poll tries again
            return False
        if self._state_bytes() != before:
            return False  # the state moved on while packing: the next poll takes a consistent copy
        self._stamp, self._rounds = stamp, rounds
        self._aside_sent.update(e for e in entries if e != self.name)
        self.send(data, self._log_since(), f"round {rounds[1][-1]} finished")
        return True

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll()

    def __enter__(self) -> FolderShipper:
        self._thread = threading.Thread(target=self._watch, name=f"kernelgen-ship-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def final(self) -> tuple[bytes, str]:
        """The whole operator folder (with the copies moved aside not sent yet) and the rest of the log."""
        return artifacts.pack(self.root, self._entries()), self._log_since()
