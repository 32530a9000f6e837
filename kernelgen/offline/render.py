"""Lay the generated pieces out as a kernel file through templates/offline/kernel_file.py.j2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

_TEMPLATE = "kernel_file.py.j2"


def _template_dir() -> Path:
    here = Path(__file__).resolve().parent.parent  # kernelgen/
    for candidate in (here / "templates" / "offline", here.parent / "templates" / "offline"):
        if (candidate / _TEMPLATE).is_file():
            return candidate
    raise FileNotFoundError(f"templates/offline/{_TEMPLATE} not found next to {here}")


def indent(lines: list[str], depth: int = 1) -> str:
    pad = "    " * depth
    return "\n".join(pad + line if line else "" for line in lines)


def render_file(**fields: Any) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_template_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env.get_template(_TEMPLATE).render(**fields)
