"""LLM configuration (placeholder until the LLM path lands: env-only detection)."""

from __future__ import annotations

import os


def llm_configured() -> bool:
    """True when an endpoint or key is configured anywhere KernelGen looks."""
    return any(os.environ.get(k) for k in ("KERNELGEN_API_KEY", "KERNELGEN_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"))
