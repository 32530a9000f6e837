"""The one door for untrusted text on its way into a prompt, the log or the screen: what a candidate
printed or raised (through the judge's verdict), and what a model wrote outside its code.

`scrub_candidate_text` is the only function the LLM path calls for that: the trusted judge's
scrubber (kernelgen.verify.judge.scrub), which masks the values of secret-named environment variables, the
configured API key, and key-shaped strings.
"""

from __future__ import annotations

from kernelgen.verify.judge.scrub import scrub


def scrub_candidate_text(text: str | None) -> str:
    """`text` with every secret masked; "" for None. Apply to anything a candidate or a model produced
    before it is put into a prompt, stored in the record or printed."""
    return scrub(text) if text else ""
