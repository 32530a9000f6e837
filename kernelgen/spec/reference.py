"""Turning a spec's `reference` source into a callable, and into the `<name>_baseline.py` file.

The reference is the user's own code: it runs with `torch`, `torch.nn.functional as F` and `math`
already imported, exactly as the rendered baseline file has them.
"""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.spec.model import OperatorSpec

# The names a reference may use without importing them; the baseline file imports the same.
PRELUDE = "import math\n\nimport torch\nimport torch.nn.functional as F\n"


def reference_filename(spec: OperatorSpec) -> str:
    """The file name the reference's code objects carry (tracebacks name it; line numbers count
    the PRELUDE's lines first)."""
    return f"<reference of {spec.name}>"


def load_reference(spec: OperatorSpec) -> Callable[..., Any]:
    """Execute the reference source and return its `<name>` function."""
    if spec.reference is None:
        raise ValueError(f"spec {spec.name!r} has no reference")
    namespace: dict[str, Any] = {"__name__": f"kernelgen_reference_{spec.name}"}
    exec(compile(PRELUDE + spec.reference, reference_filename(spec), "exec"), namespace)  # noqa: S102
    return namespace[spec.name]
