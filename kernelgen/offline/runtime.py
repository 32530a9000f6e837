"""The import line of a generated file: exactly the names of KernelGen's host runtime (kernelgen.runtime,
the version new files import) that the rendered file uses, rendered by templates/offline/_runtime.py.j2.
A family's template writes RUNTIME_IMPORT where the line goes; which names it needs depends on every
branch of the templates, so they are read off the rendered file rather than tracked through them."""

from __future__ import annotations

import ast
import importlib

from kernelgen.render import render
from kernelgen.runtime import CURRENT

RUNTIME_IMPORT = "#<kernelgen.runtime import>#"  # the templates' placeholder for the line


def runtime_names(module: str = CURRENT) -> tuple[str, ...]:
    """What a kernel file may import from the runtime module (its `__all__`)."""
    return tuple(importlib.import_module(module).__all__)


def with_runtime_import(text: str, module: str = CURRENT) -> str:
    """`text` with its placeholder line replaced by `from <module> import <the names it uses>` (no line
    where it uses none)."""
    if RUNTIME_IMPORT not in text:
        raise ValueError("the rendered file has no place for its runtime import (RUNTIME_IMPORT)")
    tree = ast.parse(text.replace(RUNTIME_IMPORT, ""))
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & set(runtime_names(module))
    if not used:
        return text.replace(RUNTIME_IMPORT + "\n", "")
    return text.replace(RUNTIME_IMPORT, render("offline/_runtime.py.j2", module=module, names=sorted(used)).strip())
