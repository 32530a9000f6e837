"""kernelgen.runtime.inline: a runtime's pieces copied into a file that runs without KernelGen."""

from __future__ import annotations

import pytest

from kernelgen.runtime import v1
from kernelgen.runtime.inline import inline, inline_imports, runtime_imports


def test_inline_brings_what_a_piece_reaches_and_only_that():
    text = inline("kernelgen.runtime.v1", ["stage_layout"])
    space: dict = {}
    exec(compile(text, "<inlined>", "exec"), space)  # noqa: S102 - KernelGen's own runtime source
    assert {"stage_layout", "view_strides", "reshape_strides", "contiguous_strides", "math"} <= set(space)
    assert "lean_launch" not in space and "torch" not in text.split("\n\n")[0]
    layouts = {"x": ((4, 6), (6, 1))}
    assert space["stage_layout"]((4, 6), [(0, 1)], [("x", [], (0, 1))], layouts) == \
        v1.stage_layout((4, 6), [(0, 1)], [("x", [], (0, 1))], layouts)


def test_inline_keeps_decorators_and_the_module_s_order():
    text = inline("kernelgen.runtime.v1", ["device_sm_count", "new_plan"])
    assert text.index("def new_plan") < text.index("@functools.lru_cache(maxsize=16)\ndef device_sm_count")
    assert text.startswith("import functools\nimport torch")


def test_inline_refuses_what_the_runtime_does_not_define():
    with pytest.raises(ValueError, match="defines no nothing_here"):
        inline("kernelgen.runtime.v1", ["nothing_here"])
    with pytest.raises(ValueError, match="not a module of kernelgen.runtime"):
        inline("kernelgen.verify.judge.judge", ["Judge"])


def test_inline_imports_replaces_the_import_statement_in_place():
    source = "import torch\nfrom kernelgen.runtime.v1 import (\n    contiguous_strides,\n)\n\nX = contiguous_strides((2, 3))\n"
    (imp,) = runtime_imports(source)
    assert (imp.module, imp.names, imp.lineno, imp.end_lineno) == ("kernelgen.runtime.v1", ("contiguous_strides",), 2, 4)
    out = inline_imports(source)
    assert "kernelgen.runtime.v1 import" not in out and out.startswith("import torch\n# --- kernelgen.runtime.v1")
    space: dict = {}
    exec(compile(out, "<file>", "exec"), space)  # noqa: S102
    assert space["X"] == (3, 1)
