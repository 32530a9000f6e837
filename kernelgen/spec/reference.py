"""Turning a spec's `reference` source into a callable, and into the `<name>_baseline.py` file.

The reference is the user's own code: it runs with `torch`, `torch.nn.functional as F` and `math`
already imported, exactly as the rendered baseline file has them.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

from kernelgen.spec.model import OperatorSpec

# The names a reference may use without importing them; the baseline file imports the same.
PRELUDE = "import math\n\nimport torch\nimport torch.nn.functional as F\n"


def reference_filename(spec: OperatorSpec) -> str:
    """The file name the reference's code objects carry (tracebacks name it; line numbers count
    the PRELUDE's lines first)."""
    return f"<reference of {spec.name}>"


def run_as_module(source: str, filename: str, module_name: str) -> dict[str, Any]:
    """The namespace of `source` run as the module `module_name`, which `import` then finds: torch.compile
    looks up a traced class's module by name, and on an H100 (PyTorch 2.11) every KernelBench problem's
    baselines-ahead compile failed with "ModuleNotFoundError: No module named 'kernelgen_baseline_...'"
    where the source ran in a bare dict. A later source of the same name takes the name over; functions
    already made keep their own namespace."""
    module = types.ModuleType(module_name)
    module.__file__ = filename
    sys.modules[module_name] = module
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - the user's own reference
    return module.__dict__


def load_reference(spec: OperatorSpec) -> Callable[..., Any]:
    """Execute the reference source and return its `<name>` function."""
    if spec.reference is None:
        raise ValueError(f"spec {spec.name!r} has no reference")
    return run_as_module(PRELUDE + spec.reference, reference_filename(spec), f"kernelgen_reference_{spec.name}")[spec.name]
