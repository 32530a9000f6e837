"""Shortening text for one line of a table or a console without breaking it: at a word boundary, with
every bracket it opened closed again (a clipped "(37927 finite but off: max abs err" reads as
unbalanced, and a reader cannot tell what was cut)."""

from __future__ import annotations

_PAIRS = {"(": ")", "[": "]", "{": "}"}


def _unclosed(text: str) -> list[str]:
    """The closers of the brackets `text` leaves open, innermost first (a stray closer is ignored)."""
    stack: list[str] = []
    for ch in text:
        if ch in _PAIRS:
            stack.append(_PAIRS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
    return stack[::-1]


def clip(text: str, n: int) -> str:
    """`text` on one line, at most about `n` characters: cut at the last space before the limit (not
    inside a word), then "…", then the closers of any bracket left open."""
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    cut = text[: max(1, n - 1)]
    space = cut.rfind(" ")
    if space > n // 2:
        cut = cut[:space]
    cut = cut.rstrip(" ,;:(")
    return cut + "…" + "".join(_unclosed(cut))
