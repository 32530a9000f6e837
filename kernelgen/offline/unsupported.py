"""The one way the offline generator refuses: an error that says an LLM is needed and how to get one."""

from __future__ import annotations

from typing import NoReturn

from kernelgen.errors import UnsupportedOperatorError

LLM_HINT = (
    "configure an LLM: set OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint) "
    "or pass --backend openai --model NAME"
)


class NotServed(UnsupportedOperatorError):
    """An UnsupportedOperatorError that keeps what was not served (`what`: "the op aten.sort.default"),
    so a family's refusal can carry it as its reason (kernelgen.offline.family.Refused)."""

    def __init__(self, what: str):
        super().__init__(f"the offline generator does not support {what}; this operator needs an LLM", hint=LLM_HINT)
        self.what = what


def unsupported(what: str) -> NoReturn:
    raise NotServed(what)
