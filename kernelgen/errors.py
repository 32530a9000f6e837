"""Domain errors. Library code raises these; only `kernelgen.cli` turns them into messages and exit codes.

Exit codes: 2 for a mistake of the user's (bad spec, bad option, missing configuration, an operator
the offline generator cannot serve), 1 for work that ran and failed (a kernel that is wrong).
"""

from __future__ import annotations

from dataclasses import dataclass


class KernelGenError(Exception):
    """Base of every error KernelGen reports to a user."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(KernelGenError):
    """A mistake in how a command was called or configured."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (`test_cases[1].bias`) and what."""

    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


class SpecError(UsageError):
    """An operator spec that cannot be used; carries one `Problem` per mistake."""

    def __init__(self, path: str, problems: list[Problem]):
        self.path = path
        self.problems = problems
        lines = "\n".join(f"  {path}: {p}" for p in problems)
        noun = "problem" if len(problems) == 1 else "problems"
        super().__init__(f"{path}: {len(problems)} {noun} in the operator spec\n{lines}")


class OutputExistsError(UsageError):
    """The output directory exists and --force was not given."""


class OperatorDirError(UsageError):
    """A path given as an operator directory is not one."""


class UnsupportedOperatorError(UsageError):
    """The offline generator cannot serve this operator; an LLM is needed."""


class ConfigError(UsageError):
    """LLM configuration missing or invalid."""


class LLMError(KernelGenError):
    """The LLM endpoint failed (connection, timeout, auth, rate limit, server error)."""


class MalformedReplyError(KernelGenError):
    """An LLM reply that cannot be used; the text is written for the model, which gets it back."""


class GenerationError(KernelGenError):
    """No correct kernel could be produced within the budgets."""


class InterruptedRunError(KernelGenError):
    """Ctrl-C; the message says what was left behind and whether the same command resumes."""

    exit_code = 130


class ReferenceFailedError(UsageError):
    """The spec's reference raised on inputs drawn for one of the spec's own test cases: no kernel can
    be judged against it; the message names the case, the dtype and the seed."""


class HarnessError(KernelGenError):
    """The trusted harness itself could not run (not the candidate failing: that is a result)."""


class TuningMemoryError(UsageError):
    """The tuning memory cannot be read or written: a damaged database, a file that is not an export
    of it, or one written by a newer KernelGen."""


class ProblemFileError(UsageError):
    """A KernelBench-format problem file no operator spec can be derived from: one reason, exit 2."""

    def __init__(self, path: object, why: str):
        self.path = str(path)
        self.why = why
        super().__init__(f"{path}: cannot derive an operator spec: {why}")


class ServiceError(KernelGenError):
    """`kernelgen serve` could not start, reach or stop the KernelGen service. Other commands never
    raise it: without a usable service they do their work in their own process."""
