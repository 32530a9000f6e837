"""The allowlist of what a kernel file may import and reach (kernelgen.verify.judge.allowlist, surface):
every honest kernel the project has passes it unchanged; every entry exists in the installed library and
passes in a kernel file; each way off it is refused with a message that names the construct, its line and
the entry it missed. Since issue 40 values take any attribute but those that walk to Python's frames,
code and tracebacks: the recording, not this list, sees what a wrapper does with its tensors."""

from __future__ import annotations

import ast
import collections
import hashlib
import inspect
import importlib
import re
from pathlib import Path

import pytest

from kernelgen.verify.judge import allowlist as al
from kernelgen.verify.judge.staticcheck import check_source
from tests.support.kernel_corpus import every_kernel

HONEST = (Path(__file__).parent / "adversarial" / "honest.py").read_text()


def _statements_shape(text: str, module_docstring: bool) -> str | None:
    """The shape of whole top-level statements (None: `text` is not whole statements). Numbers and
    docstrings are left out: two knob values of one template touch the same names, and the allowlist
    reads no number. A module's docstring is only the first statement of the file."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and (isinstance(node.value, (int, float)) or node.value is None):
            node.value = 0
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and (module_docstring or not isinstance(node, ast.Module)):
            body[0].value.value = ""
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


_TOP_LEVEL = re.compile(r"^(?=[A-Za-z_@])", re.M)  # a line that may start a top-level statement


def _shape(source: str, seen: dict[tuple[bool, str], str | None]) -> str:
    """The file's shape (`_statements_shape` of the whole file), computed a run of top-level statements
    at a time and remembered in `seen` by their text: the 2,800 generated files differ from each other in
    a few statements, and parsing each file whole took 95 of the test's 150 s. A run is cut at a line
    that starts at column 0 and grows until it parses: a cut inside a string, a bracket, a decorated
    definition or an if/else is not whole statements and does not parse, so each run is whole
    statements and the file's tree is the runs' trees one after another."""
    shapes, run = [], ""
    for piece in _TOP_LEVEL.split(source):
        run += piece
        key = (not shapes, run)
        if key not in seen:
            seen[key] = _statements_shape(run, module_docstring=not shapes) if run else None
        if seen[key] is not None:
            shapes.append(seen[key])
            run = ""
    assert not run.strip(), "an honest kernel file does not parse"
    return hashlib.sha256(" ".join(shapes).encode()).hexdigest()


@pytest.mark.slow
def test_every_honest_kernel_passes_the_allowlist_unchanged():
    seen: dict[str, str] = {}
    statements: dict[tuple[bool, str], str | None] = {}
    failures = []
    count = 0
    for kernel in every_kernel():
        count += 1
        shape = _shape(kernel.source, statements)
        if shape in seen:
            continue
        seen[shape] = kernel.label
        found = check_source(kernel.source, kernel.entry)
        if found:
            failures.append(f"{kernel.label}: " + "; ".join(f"{v.code} {v.message}" for v in found))
    assert count > 1000 and len(seen) > 100, (count, len(seen))  # the generator's whole range, not a sample
    assert not failures, "\n".join(failures)


def _uses(expr: str, imports: str = "") -> list[tuple[str, str]]:
    """The violations of the honest kernel with `expr` evaluated in its wrapper."""
    src = imports + "\n" + HONEST.replace("    return out\n", f"    _probe = {expr}\n    return out\n")
    return [(v.code, v.message) for v in check_source(src, "broadcast")]


def _resolve(path: str):
    """The object `path` names; the active driver's names (no GPU driver here) from Triton's driver source."""
    if path.startswith("triton.runtime.driver.active"):
        from triton.backends.driver import GPUDriver
        from triton.backends.nvidia.driver import CudaDriver

        assert isinstance(inspect.getattr_static(type(_resolve("triton.runtime.driver")), "active"), property)
        name = path.rsplit(".", 1)[-1]
        assert name == "active" or name in inspect.getsource(GPUDriver) + inspect.getsource(CudaDriver), path
        return None
    root, *rest = path.split(".")
    obj = importlib.import_module(root)
    for i, part in enumerate(rest):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join([root, *rest[: i + 1]]))
    return obj


ENTRIES = [(ns, name) for ns, rows in al.NAMESPACES.items() for name in rows if name != "*"]
# Names of newer releases than the installed one may be listed; none is today.
OPTIONAL: set[tuple[str, str]] = set()


@pytest.mark.parametrize("namespace, name", ENTRIES, ids=[f"{ns}.{n}" for ns, n in ENTRIES])
def test_every_entry_exists_and_passes_in_a_kernel_file(namespace, name):
    if (namespace, name) not in OPTIONAL:
        obj = _resolve(f"{namespace}.{name}")
        # a module is a namespace (a table of its own), never a value whose attributes go unchecked
        assert f"{namespace}.{name}" in al.NAMESPACES or not inspect.ismodule(obj), f"{namespace}.{name} is a module"
    root = namespace.split(".")[0]
    imports = "" if root in ("torch", "triton") else "import kernelgen.runtime.v1" if root == "kernelgen" else f"import {root}"
    if root == "__future__":
        return  # `from __future__ import annotations` is a statement of its own, checked below
    path = f"{namespace}.{name}"
    if path in SETTER_USES:  # these copy attributes: used on the file's own objects only (the monkeypatch rule)
        src = f"{imports}\n{HONEST}\n\n{SETTER_USES[path]}\n"
        assert check_source(src, "broadcast") == [], check_source(src, "broadcast")
        return
    expr = f"{path}.ALL" if path in al.NAMESPACES and path.endswith("PropagateNan") else path
    assert _uses(expr, imports) == []


SETTER_USES = {
    "functools.wraps": "def outer(f):\n    @functools.wraps(f)\n    def inner(*a):\n        return f(*a)\n    return inner",
    "functools.update_wrapper": "def outer(f):\n    def inner(*a):\n        return f(*a)\n    return functools.update_wrapper(inner, f)",
    "functools.total_ordering": "@functools.total_ordering\nclass Order:\n    def __init__(self):\n        self.v = 0",
    "dataclasses.dataclass": "@dataclasses.dataclass\nclass Cfg:\n    block: int = 4",
}


def test_every_importable_module_imports():
    for module in al.IMPORTABLE:
        importlib.import_module(module)
        assert module in al.NAMESPACES
        assert check_source(f"import {module}\n" + HONEST, "broadcast") == []
    assert check_source("from __future__ import annotations\n" + HONEST, "broadcast") == []


@pytest.mark.parametrize("name", ["tile", "mode", "offset", "start", "step", "shape", "data", "untyped_storage",
                                  "grad_fn", "packed_metadata", "element_ty"])
def test_a_value_takes_any_attribute_that_does_not_walk_to_the_interpreter(name):
    assert _uses(f"x.{name}") == []


@pytest.mark.parametrize("name", sorted(al.escape_attrs()))
def test_every_attribute_of_frames_code_and_tracebacks_is_refused(name):
    found = _uses(f"x.{name}")
    assert [c for c, _ in found] == ["forbidden-api"] and f".{name} walks to Python's frames" in found[0][1], found


@pytest.mark.parametrize("name", sorted(al.BUILTINS))
def test_every_builtin_exists_and_passes(name):
    import builtins

    assert hasattr(builtins, name)
    call = f"{name}(x, '{'shape'}')" if name in ("getattr", "hasattr") else f"{name}"
    assert _uses(call) == []


def test_the_kernel_language_is_listed_whole():
    """A Triton upgrade that adds public names to triton.language shows here: review, then list them."""
    import triton.language as tl

    public = {n for n in dir(tl) if not n.startswith("_") and not inspect.ismodule(getattr(tl, n))}
    assert public <= set(al.NAMESPACES["triton.language"]), sorted(public - set(al.NAMESPACES["triton.language"]))


def test_libdevice_is_every_public_function_of_the_installed_module():
    rows = al.table("triton.language.extra.libdevice")
    assert rows is not None and len(rows) > 100 and "exp" in rows and "pow" in rows
    assert _uses("libdevice.pow(1.0, 2.0)", "from triton.language.extra import libdevice") == []


# --- refusals: the construct, its line, the entry it missed ---------------------------------------------
@pytest.mark.parametrize("expr, imports, code, says", [
    ("torch.sys.modules", "", "forbidden-api", ["torch.sys", "'sys' is not on the allowlist of torch"]),
    ("torch.cuda.Stream()", "", "forbidden-api", ["'Stream' is not on the allowlist of torch.cuda"]),
    ("torch.utils", "", "forbidden-api", ["'utils' is not on the allowlist of torch"]),
    ("triton.runtime.driver.active.utils", "", "forbidden-api", ["'utils' is not on the allowlist of triton.runtime.driver.active"]),
    ("x._version", "", "private-attribute", ["x._version", "'_version' starts with '_'"]),
    ("x.gi_frame.f_back", "", "forbidden-api", [".gi_frame walks to Python's frames, code or tracebacks"]),
    ("getattr(x, '_ver' + 'sion')", "", "forbidden-call", ["getattr() with a computed attribute name"]),
    ("getattr(torch, 'sys')", "", "forbidden-api", ["'sys' is not on the allowlist of torch"]),
    ("getattr(x, 'f_globals')", "", "forbidden-api", [".f_globals walks to Python's frames"]),
    ("(lambda g=getattr: g)()", "", "forbidden-call", ["passes getattr as a value"]),
    ("id(x)", "", "forbidden-call", ["the builtin 'id'"]),
    ("hash(x)", "", "forbidden-call", ["the builtin 'hash'"]),
    ("vars(x)", "", "forbidden-call", ["the builtin 'vars'"]),
    ("type(x)", "", "forbidden-call", ["the builtin 'type'"]),
    ("[torch][0].sys", "", "forbidden-api", ["uses torch (torch) as a value"]),
    ("(lambda m=tl: m)()", "", "forbidden-api", ["uses triton.language (tl) as a value"]),
    ("F.relu(x)", "import torch.nn.functional as F", "forbidden-import", ["imports 'torch.nn.functional'"]),
    ("np.zeros(1)", "import numpy as np", "forbidden-import", ["imports 'numpy'"]),
    ("lru", "from functools import _lru_cache_wrapper as lru", "private-attribute", ["_lru_cache_wrapper"]),
    ("e", "from torch import empty as e, sys as s", "forbidden-api", ["from torch import sys: 'sys' is not on the allowlist of torch"]),
])
def test_each_way_off_the_allowlist_is_refused_by_name(expr, imports, code, says):
    found = _uses(expr, imports)
    messages = [m for c, m in found if c == code]
    assert any(m.startswith("line ") and all(phrase in m for phrase in says) for m in messages), found


def test_a_module_reaches_no_value_through_an_alias_of_an_alias_or_a_class_attribute():
    """`torch.load` is not on the allowlist; `load` is an attribute a value may have (a descriptor's)."""
    chained = HONEST + "\n\ndef helper(p):\n    c = b\n    return c.load(p)\n\n\nb = torch\n"
    assert any("'load' is not on the allowlist of torch" in v.message for v in check_source(chained, "broadcast"))
    in_class = HONEST + "\n\nclass Holder:\n    m = torch\n\n\ndef helper(p):\n    return Holder.m.load(p)\n"
    assert any("uses torch (torch) as a value" in v.message for v in check_source(in_class, "broadcast"))


def test_a_name_for_a_module_stays_one():
    src = "import torch\n" + HONEST + "\n\ndef helper(y):\n    b = torch.cuda\n    return b.is_available(), b.Stream\n"
    found = [(v.code, v.message) for v in check_source(src, "broadcast")]
    assert any("'Stream' is not on the allowlist of torch.cuda" in m for _, m in found), found
    rebound = HONEST + "\n\ndef helper(y):\n    torch = y\n    return torch.sys\n"
    assert any("binds 'torch'" in v.message for v in check_source(rebound, "broadcast"))


def test_the_files_own_field_names_are_its_own_to_choose():
    """`tile`, `mode`, `offset`, `start`, `step` are ordinary config fields (issue 40: refused until then as
    also being attributes of slices, ranges and files); a field that is a frame's attribute is refused
    where it is used, as any use of that name is."""
    ok = HONEST + ("\n\nclass Cfg:\n    def __init__(self):\n        self.tile, self.mode, self.offset = 4, 'rows', 0\n"
                   "        self.start, self.step = 0, 1\n\n\ndef size(c):\n    return c.tile * c.step + c.offset\n")
    assert check_source(ok, "broadcast") == []
    own = HONEST + "\n\nclass Cfg:\n    def __init__(self):\n        self.block = 4\n        self.gi_frame = None\n"
    found = check_source(own, "broadcast")
    assert [v.code for v in found] == ["forbidden-api"] and "line 33: self.gi_frame: .gi_frame walks" in found[0].message


def test_builtins_follow_pythons_scoping():
    local = HONEST + "\n\ndef helper(input):\n    id = input\n    return id\n"  # locals named like builtins
    assert check_source(local, "broadcast") == []
    hidden = HONEST + "\n\nif False:\n    open = print\n\n\ndef helper(p):\n    return open(p)\n"
    codes = [v.code for v in check_source(hidden, "broadcast")]
    assert "forbidden-call" in codes  # a module-level `open` that may not be bound falls through to the builtin


def test_classes_derive_only_from_allowed_bases():
    for base in ("triton.JITFunction", "torch.cuda.device", "dict"):
        src = HONEST + f"\n\nclass K({base}):\n    pass\n"
        assert "introspection" in {v.code for v in check_source(src, "broadcast")}, base
    ok = HONEST + "\n\nimport typing\n\n\nclass P(typing.NamedTuple):\n    block: int\n\n\nclass E(ValueError):\n    pass\n"
    assert check_source(ok, "broadcast") == []


def test_no_chain_of_admitted_names_reaches_the_worker_or_the_interpreter():
    """From every importable module, following only admitted names (a namespace's table; on anything
    else every public attribute but the escape ones), three steps deep, in a process with the worker's
    launch hooks installed: no module outside the tables (sys, gc, builtins, os, ...), no frame, code or
    generator, and nothing of kernelgen's but the launch hooks (plain functions, whose only attributes
    are dunders) and the host runtime's pieces (kernelgen.runtime.v1), whose attributes are followed too."""
    import types

    from kernelgen.verify.record import launches
    from kernelgen.verify.worker import guard

    guard.install_launch_hooks()
    launches.install()
    hooks = (guard.__name__, launches.__name__)
    todo = collections.deque((m, importlib.import_module(m), 0) for m in sorted(al.IMPORTABLE) if m != "__future__")
    seen: set[int] = set()
    bad = []
    while todo:  # breadth first: each object at the shallowest depth it is reached
        path, obj, depth = todo.popleft()
        if id(obj) in seen or depth > 3:
            continue
        seen.add(id(obj))
        rows = al.table(path) if path in al.NAMESPACES else None
        for name in (rows if rows is not None else [n for n in _names(obj) if not n.startswith("_") and n not in al.escape_attrs()]):
            try:
                value = getattr(obj, name)
            except Exception:  # noqa: BLE001 - a property that needs a GPU (the active driver) reaches nothing here
                continue
            where = f"{path}.{name}"
            module = getattr(value, "__module__", None) or ""
            if inspect.ismodule(value) and where not in al.NAMESPACES:
                bad.append(f"{where} is the module {value.__name__}")
            elif isinstance(value, (types.FrameType, types.CodeType, types.GeneratorType, types.TracebackType)):
                bad.append(f"{where} is a {type(value).__name__}")
            elif module.startswith("kernelgen") and not (module in hooks and inspect.isroutine(value)) \
                    and module not in al.IMPORTABLE:  # kernelgen.runtime.v1's pieces: followed like any value
                bad.append(f"{where} is kernelgen's {value!r}")
            else:
                todo.append((where, value, depth + 1))
    assert len(seen) > 5000 and not bad, bad


def _names(obj) -> set[str]:  # noqa: ANN001
    try:
        return set(dir(obj))
    except Exception:  # noqa: BLE001 - an object whose __dir__ fails offers no attribute to follow
        return set()


# --- KernelGen's host runtime: the one module of kernelgen a kernel may import (issue 41) ------------------
@pytest.mark.parametrize("imports,probe,code,says", [
    ("from kernelgen.verify.judge import judge", "judge", "forbidden-import", "imports 'kernelgen.verify.judge'"),
    ("import kernelgen.verify.worker.guard", "0", "forbidden-import", "imports 'kernelgen.verify.worker.guard'"),
    ("from kernelgen.runtime import v1", "v1", "forbidden-import", "imports 'kernelgen.runtime'"),
    ("from kernelgen.runtime.script_v1 import check_device", "check_device", "forbidden-import",
     "imports 'kernelgen.runtime.script_v1'"),
    ("import kernelgen", "kernelgen", "forbidden-import", "imports 'kernelgen'"),
    ("import kernelgen.runtime.v1", "kernelgen.verify", "forbidden-api", "'verify' is not on the allowlist of kernelgen"),
    ("import kernelgen.runtime.v1", "kernelgen.runtime.inline", "forbidden-api", "'inline' is not on the allowlist of kernelgen.runtime"),
    ("from kernelgen.runtime.v1 import torch", "torch", "forbidden-api", "'torch' is not on the allowlist of kernelgen.runtime.v1"),
    ("from kernelgen.runtime.v1 import new_plan", "new_plan.__globals__", "introspection", "__globals__"),
])
def test_a_kernel_reaches_kernelgen_only_through_its_runtime(imports, probe, code, says):
    found = _uses(probe, imports)
    assert any(c == code and says in m for c, m in found), found


def test_an_honest_kernel_may_use_the_runtime():
    assert _uses("new_plan({}, max, (1, 2)), keep_launch, lean_launch", "from kernelgen.runtime.v1 import keep_launch, "
                 "lean_launch, new_plan") == []
    assert _uses("rt.contiguous_strides((2, 3)), kernelgen.runtime.v1.contiguous_strides((2,))",
                 "import kernelgen.runtime.v1\nimport kernelgen.runtime.v1 as rt") == []
