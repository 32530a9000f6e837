"""Reading an LLM reply: the kernel file comes from its fenced code block(s).

Accepted: one ```python block holding the whole file (always); blocks marked with a first line
`# file: <name>_triton.py`; a kernel block and a wrapper block that together make the file.
Refused, with a `MalformedReplyError` whose text is written for the model (it gets it back and
tries again): no code, several blocks that each define the entry function differently, a syntax
error, a missing or misnamed entry function, a signature other than the baseline's.

Outside the code, the model may state `CHANGE:`, `TYPE:` and `REASON:` (the optimization prompt
asks for them) and `CAUSE:` (the repair prompt does); a field runs on over the following lines up to
a blank line or the next field. The rest of the prose is kept too: round 0's design note, and the
cause of a failure when the model stated it without the `CAUSE:` label (its last sentence before
the code). All of it is untrusted text: it is scrubbed (kernelgen.llm.untrusted) before it is kept.
"""

from __future__ import annotations

import ast
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kernelgen.errors import MalformedReplyError
from kernelgen.llm.untrusted import scrub_candidate_text
from kernelgen.spec import OperatorSpec

_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FILE_MARK_RE = re.compile(r"^\s*#\s*(?:file(?:name)?\s*:\s*)?([\w./-]+\.py)\s*$", re.IGNORECASE)
_FIELD_RE = re.compile(r"^\s*[*_#]*\s*(CHANGE|TYPE|REASON|CAUSE)[*_]*\s*:[*_]*\s*(.*?)\s*$", re.IGNORECASE)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")
_CLAUSE_END_RE = re.compile(r"(?<=[.!?:])\s+")  # "Here is the kernel: One program per row." is two pieces
# Sentences that say nothing about the kernel: apologies, acknowledgements and introductions of the
# code. Kept as the model's "design note", an apology reads as if it were the design.
_CEREMONY_RE = re.compile(r"^\W*(sorry|apologi[sz]e|my apologies|i apologi[sz]e|apologies|you'?re (absolutely )?right|"
                          r"thanks?\b|thank you|certainly|sure\b|of course|great\b|okay\b|ok\b|"
                          r"(here|below) (is|are)|here'?s)", re.IGNORECASE)
# Bounds against a runaway reply, far above what any honest field needs: nothing is cut at 200 characters.
FIELD_LIMIT = {"change": 2000, "reason": 6000, "cause": 2000}
NOTE_LIMIT = 4000
_PY_LANGS = {"", "python", "py", "python3"}


class CodeBlock(BaseModel):
    model_config = ConfigDict(frozen=True)

    lang: str
    code: str
    filename: str | None = None  # from a first-line `# file: x.py` marker


class ParsedReply(BaseModel):
    """What a well-formed reply gave us."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # the whole <name>_triton.py
    baseline_source: str | None = None  # only when asked for (description-only specs)
    change: str = ""
    change_type: Literal["parameters", "interface", "logic", ""] = ""
    reason: str = ""
    cause: str = ""  # a repair reply's one-sentence cause of the failure
    note: str = ""  # the prose outside the code: round 0's design note


def code_blocks(text: str) -> list[CodeBlock]:
    """Fenced blocks in order; a reasoning model's <think> section is not part of the answer."""
    text = _THINK_RE.sub("", text)
    blocks = []
    for m in _FENCE_RE.finditer(text):
        code = m.group(3)
        lines = code.splitlines()
        fname = None
        if lines and (mark := _FILE_MARK_RE.match(lines[0])):
            fname = mark.group(1).rsplit("/", 1)[-1]
        blocks.append(CodeBlock(lang=m.group(2).lower(), code=code.strip("\n") + "\n", filename=fname))
    return blocks


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


def _pick_file(blocks: list[CodeBlock], filename: str, entry: str, *, what: str) -> str:
    """The one file among the blocks; MalformedReplyError when there is none or more than one."""
    marked = [b for b in blocks if b.filename == filename]
    if marked:
        texts = {b.code for b in marked}
        if len(texts) > 1:
            raise MalformedReplyError(
                f"Your reply contains {len(marked)} different code blocks marked `{filename}`. "
                f"Reply with exactly one ```python block holding the whole {filename}.")
        return marked[0].code
    candidates = [b for b in blocks if b.filename is None and b.lang in _PY_LANGS]
    if not candidates:
        raise MalformedReplyError(
            f"Your reply contains no Python code block for {what}. Reply with the whole file `{filename}` "
            "in one fenced block: ```python ... ```")
    with_entry = [b for b in candidates if _defines(b.code, entry)]
    if len({b.code for b in with_entry}) > 1:
        raise MalformedReplyError(
            f"Your reply contains {len(with_entry)} code blocks that each define `{entry}` differently, so it is "
            f"not clear which one is {filename}. Reply with exactly one ```python block holding the whole file.")
    if len(candidates) == 1:
        return candidates[0].code
    if with_entry:
        entry_block = with_entry[0]
        if "@triton.jit" in entry_block.code or "@jit" in entry_block.code:
            return entry_block.code  # complete on its own; other blocks are examples or usage
        # The kernel in one block and the wrapper in another: together they are the file.
        parts = [b.code for b in candidates if b is entry_block or "@triton" in b.code]
        return "\n\n".join(parts)
    raise MalformedReplyError(
        f"None of the code blocks in your reply defines `def {entry}(...)`. Reply with the whole file `{filename}` "
        "in one ```python block.")


def _check_file(source: str, spec: OperatorSpec, filename: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        line = (e.text or "").rstrip()
        raise MalformedReplyError(
            f"The code you sent for {filename} does not parse: line {e.lineno}: {e.msg}"
            + (f"\n    {line}" if line else "") + "\nSend the corrected whole file in one ```python block.") from None
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    expected = f"{spec.name}({spec.signature})"
    if spec.name not in funcs:
        found = ", ".join(f"{n}()" for n in funcs) or "none"
        raise MalformedReplyError(
            f"{filename} must define a module-level function `{expected}` (the same signature as the baseline); "
            f"the code you sent defines: {found}. Send the whole file again with that entry function.")
    fn = funcs[spec.name].args
    positional = [a.arg for a in fn.posonlyargs + fn.args]
    wanted = spec.input_names + [p.name for p in spec.params]
    given = positional + [a.arg for a in fn.kwonlyargs]
    if positional[: len(spec.input_names)] != spec.input_names or sorted(given) != sorted(wanted):
        raise MalformedReplyError(
            f"`{spec.name}` in {filename} takes ({', '.join(given)}) but must take exactly ({spec.signature}), "
            "the baseline's parameters in the same order. Send the whole file again.")


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _prose(text: str) -> str:
    """The reply without its code blocks and <think> section."""
    return _FENCE_RE.sub("", _THINK_RE.sub("", text)).strip()


def _fields(text: str) -> dict[str, str]:
    outside = _prose(text)
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in outside.splitlines():
        m = _FIELD_RE.match(line)
        if m:
            key = m.group(1).lower()
            current = key if key not in found else None  # the first statement of a field counts
            if current:
                found[current] = [m.group(2)] if m.group(2) else []
        elif current and line.strip():
            found[current].append(line.strip())
        else:
            current = None
    value = {k: scrub_candidate_text(" ".join(v)).strip() for k, v in found.items()}
    kind = value.get("type", "").lower().strip("`*. ")
    kind = next((k for k in ("parameters", "interface", "logic") if kind.startswith(k)), "")
    return {"change": _bounded(value.get("change", ""), FIELD_LIMIT["change"]),
            "reason": _bounded(value.get("reason", ""), FIELD_LIMIT["reason"]),
            "cause": _bounded(value.get("cause", "") or _cause_in_prose(text), FIELD_LIMIT["cause"]),
            "change_type": kind, "note": _bounded(scrub_candidate_text(substance(outside)), NOTE_LIMIT)}


def substance(prose: str) -> str:
    """The prose without its ceremony (apologies, "Here is the kernel:"): what it says about the kernel."""
    pieces = [s.strip() for s in _CLAUSE_END_RE.split(" ".join(prose.split())) if s.strip()]
    return " ".join(s for s in pieces if not _CEREMONY_RE.match(s))


def _cause_in_prose(text: str) -> str:
    """The last sentence before the first code block: where the repair prompt asks for the cause."""
    text = _THINK_RE.sub("", text)
    first = _FENCE_RE.search(text)
    before = " ".join((text[: first.start()] if first else "").split())
    if not before:
        return ""
    sentences = [s.strip() for s in _SENTENCE_END_RE.split(before) if s.strip() and not _CEREMONY_RE.match(s.strip())]
    last = sentences[-1] if sentences else ""
    if last.endswith(":") and len(sentences) > 1:  # "The fixed kernel follows:" introduces the code
        last = sentences[-2]
    return scrub_candidate_text(last)


def parse_reply(text: str, spec: OperatorSpec, *, want_baseline: bool = False, finish_reason: str | None = None) -> ParsedReply:
    """The kernel file (and the baseline when asked for) from a reply, or MalformedReplyError."""
    if not text.strip():
        if finish_reason == "length":
            raise MalformedReplyError("Your reply was cut off at the token limit before any code. "
                                      "Reply with less explanation: the whole file in one ```python block.")
        raise MalformedReplyError("Your reply was empty. Reply with the whole kernel file in one ```python block.")
    blocks = code_blocks(text)
    if not blocks:
        cut = " It was cut off at the token limit; be shorter." if finish_reason == "length" else ""
        raise MalformedReplyError(
            f"Your reply contains no fenced code block.{cut} Reply with the whole file `{spec.name}_triton.py` "
            "in one block that starts with ```python and ends with ```.")
    kernel_name = f"{spec.name}_triton.py"
    if want_baseline:
        baseline_name = f"{spec.name}_baseline.py"
        baseline = _pick_file([b for b in blocks if b.filename == baseline_name], baseline_name, spec.name,
                              what="the baseline") if any(b.filename == baseline_name for b in blocks) else None
        if baseline is None:
            raise MalformedReplyError(
                f"This operator has no reference implementation, so you must write it too: send `{baseline_name}` "
                f"(plain PyTorch, defining `{spec.name}({spec.signature})`) and `{kernel_name}`, each in its own "
                f"```python block whose first line is `# file: <filename>`.")
        _check_file(baseline, spec, baseline_name)
        kernel = _pick_file([b for b in blocks if b.filename != baseline_name], kernel_name, spec.name, what="the kernel")
    else:
        baseline = None
        kernel = _pick_file(blocks, kernel_name, spec.name, what="the kernel")
    _check_file(kernel, spec, kernel_name)
    return ParsedReply(source=kernel, baseline_source=baseline, **_fields(text))


def short_reason(err: MalformedReplyError) -> str:
    """A few words for the attempts list: 'no code block', 'syntax error', ..."""
    m = err.message
    for needle, words in (("no fenced code block", "no code block"), ("no Python code block", "no code block"),
                          ("was empty", "empty reply"), ("cut off", "cut off at the token limit"),
                          ("does not parse", "syntax error"), ("differently", "several conflicting files"),
                          ("different code blocks", "several conflicting files"), ("must take exactly", "wrong signature"),
                          ("must define a module-level", "missing entry function"), ("None of the code blocks", "missing entry function"),
                          ("no reference implementation", "baseline missing")):
        if needle in m:
            if words == "syntax error":
                first = m.split("\n")[0].split(": ", 1)[-1]
                return f"syntax error ({first})"
            return words
    return m.split("\n")[0][:80]
