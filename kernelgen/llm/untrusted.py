"""The one door for untrusted text on its way into a prompt, the log or the screen: what a candidate
printed or raised (through the judge's verdict), and what a model wrote outside its code.

`scrub_candidate_text` is the only function the LLM path calls for that. It uses the trusted judge's
scrubber, `kernelgen.verify.scrub.scrub`, when the installation has it; until then a local fallback
removes the same things: key-shaped strings and the values of secret-named environment variables.
"""

from __future__ import annotations

import os
import re
from typing import Callable

MASK = "****"
# Shapes API keys take: OpenAI/Anthropic/DeepSeek style `sk-...`, bearer tokens, GitHub and
# Hugging Face tokens, AWS access key ids. Long enough not to match code identifiers.
_KEY_SHAPES = re.compile(
    r"(?:\bsk-[A-Za-z0-9_\-]{16,}"
    r"|\bBearer\s+[A-Za-z0-9._\-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bhf_[A-Za-z0-9]{20,}"
    r"|\bAKIA[0-9A-Z]{16}\b)"
)
_SECRET_NAMES = re.compile("KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def _fallback_scrub(text: str) -> str:
    # Values of secret-named variables first (a key of any shape the user has set), longest first
    # so that one value containing another is masked whole.
    values = sorted({v for k, v in os.environ.items() if _SECRET_NAMES.search(k) and len(v) >= 8}, key=len, reverse=True)
    for value in values:
        text = text.replace(value, MASK)
    return _KEY_SHAPES.sub(MASK, text)


def _judge_scrubber() -> Callable[[str], str] | None:
    try:
        from kernelgen.verify.scrub import scrub  # type: ignore[import-not-found]
    except ImportError:
        return None
    return scrub


def scrub_candidate_text(text: str | None) -> str:
    """`text` with every secret masked; "" for None. Apply to anything a candidate or a model produced
    before it is put into a prompt, stored in the record or printed."""
    if not text:
        return ""
    scrub = _judge_scrubber()
    return scrub(text) if scrub is not None else _fallback_scrub(text)
