"""The terminal: the two consoles, the one error boundary (a KernelGenError becomes a message and an exit
code, never a traceback), progress lines, and printing a run's verdict."""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Iterator

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape

from kernelgen.errors import KernelGenError

# Piped output (CI logs, the device tool) gets 80 columns by default, which folds the perf table
# into unreadable cells; 140 fits its ten columns.
out = Console() if sys.stdout.isatty() else Console(width=140)
err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=140)

@contextlib.contextmanager
def llm_warnings() -> Iterator[None]:
    """Warnings of the LLM path (a replayed prompt that differs from the recording) as plain lines."""
    from kernelgen.llm.recording import ReplayMismatchWarning

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        if issubclass(category, ReplayMismatchWarning):
            err.print(f"[yellow]warning:[/] {message}", markup=True, highlight=False)
        else:
            default(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        default = warnings.showwarning
        warnings.simplefilter("always", ReplayMismatchWarning)
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def errors_to_exit() -> Iterator[None]:
    """The error boundary: a KernelGenError becomes a message and an exit code, never a traceback."""
    try:
        yield
    except KernelGenError as e:
        err.print(f"[bold red]error:[/] {escape(e.message)}", markup=True, highlight=False)
        if e.hint:  # escaped: a hint such as pip install 'kernelgen[ray]' is text, not markup
            err.print(f"[yellow]hint:[/] {escape(e.hint)}", markup=True, highlight=False)
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt:
        err.print("interrupted; finished rounds are saved and the same command resumes")
        raise typer.Exit(130) from None
    except Exception as e:
        # torch.OutOfMemoryError, matched by name (this module does not import torch): the device,
        # not the user's input, ran out; the first line says how much was asked for and what was free
        if type(e).__name__ != "OutOfMemoryError":
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else "out of memory"
        err.print(f"[bold red]error:[/] the GPU ran out of memory: {escape(first)}", markup=True, highlight=False)
        err.print("[yellow]hint:[/] the perf case needs more free GPU memory: close other processes on it, or run "
                  "fewer at once (kernelgen batch --per-gpu 1)", markup=True, highlight=False)
        raise typer.Exit(1) from None


@contextlib.contextmanager
def progress(label: str) -> Iterator:
    """A spinner whose text follows the current step; each step is also printed as a line."""
    with out.status(label) as status:
        def step(msg: str) -> None:
            status.update(msg)
            out.print(f"[dim]•[/] {msg}", highlight=False)
        yield step


def print_run(record, title: str) -> None:  # noqa: ANN001 - RunRecord
    from kernelgen.record.display import perf_table
    from kernelgen.record.oplog import accuracy_text, perf_text

    if record.kind == "performance" and record.performance and record.performance.cases:
        perf = record.performance
        out.print(perf_table(perf))
        if perf.note:
            out.print(perf.note, highlight=False)
        for v in record.all_violations():  # in full, under the table whose lines name their codes
            out.print(f"[bold red]violation {escape(v.code)}:[/] {escape(v.message)}", highlight=False)
        if perf.error:
            out.print(f"[bold red]error:[/] {escape(perf.error.strip().splitlines()[-1])}", highlight=False)
        return
    text = accuracy_text(record) if record.kind == "accuracy" else perf_text(record)
    out.print(Markdown(f"**{title}**\n\n{text}"))
