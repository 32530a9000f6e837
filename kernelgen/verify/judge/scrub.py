"""Secrets out of everything a candidate produced, before it is printed, stored or put into a prompt.

Two nets: the values of every secret KernelGen knows (environment variables whose names look like
credentials, and keys the LLM configuration registers with `register_secret`), and key-shaped
strings whatever their source (OpenAI / Anthropic / GitHub / Hugging Face / AWS / Google / Slack
tokens, bearer headers, `api_key = ...` assignments). A candidate cannot read the judge's
environment or the user's config file from its sandbox; this is the net for what slips through
another way (an exception message, an older tool, a key in a file the candidate was given).
"""

from __future__ import annotations

import os
import re

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_SECRET_LEN = 8  # shorter values ("1", "true") would redact half the text

_KEY_SHAPES = [
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",  # OpenAI, Anthropic, DeepSeek, most OpenAI-compatible hosts
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"AKIA[0-9A-Z]{16}",  # AWS access key id
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API key
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"(?i:bearer)\s+[A-Za-z0-9._\-]{12,}",
    r"(?i:api[_-]?key|access[_-]?token|secret[_-]?key|password)[\"']?\s*[:=]\s*[\"']?[^\s\"',;]{8,}",
]
_SHAPES = re.compile("|".join(f"(?:{p})" for p in _KEY_SHAPES))
_REGISTERED: set[str] = set()


def register_secret(value: str | None) -> None:
    """A secret the process holds outside its environment (an API key read from a config file)."""
    if value and len(value) >= MIN_SECRET_LEN:
        _REGISTERED.add(value)


def known_secrets() -> list[str]:
    found = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(found | _REGISTERED, key=len, reverse=True)  # longest first: no half-redacted keys


def scrub(text: str | None) -> str:
    """`text` with every known secret and every key-shaped string replaced by [REDACTED]."""
    if not text:
        return text or ""
    for secret in known_secrets():
        text = text.replace(secret, REDACTED)
    return _SHAPES.sub(REDACTED, text)
