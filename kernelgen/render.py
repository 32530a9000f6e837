"""Jinja2 rendering of every generated file and prompt, from `templates/`.

StrictUndefined: a template that names a variable nobody passed is an error naming it, not an
empty string in a prompt or a test file.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2


def templates_dir() -> Path:
    """`kernelgen/templates` inside an installed wheel; the repository's `templates/` otherwise."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "templates", here.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("KernelGen's templates/ directory is missing from this installation")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )


def render(template: str, /, **context: Any) -> str:
    """Render `templates/<template>` with exactly these variables."""
    return environment().get_template(template).render(**context)
