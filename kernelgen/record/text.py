"""Text for one line of a table or a console: shortened without breaking it (at a word boundary, with
every bracket it opened closed again: a clipped "(37927 finite but off: max abs err" reads as
unbalanced, and a reader cannot tell what was cut), and numbers in the unit that fits them (806400
FLOP is "806 kFLOP", not "0.00 GFLOP")."""

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


def si(x: float, unit: str) -> str:
    """`x` with the SI prefix that keeps three significant digits: 806400 FLOP -> "806 kFLOP"."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"
