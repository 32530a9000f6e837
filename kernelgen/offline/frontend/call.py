"""One ATen call of a traced fx graph, as an op-table handler (kernelgen.offline.frontend.optable)
reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    node: Any  # the fx node: its meta["val"] holds the result (shape and dtype)
    base: str  # the op's name without the in-place underscore: "add" for aten.add_
    overload: str  # "Tensor", "dim", "default", ...
    args: list
    kwargs: dict
    dtype: str  # the result's dtype ("float32" where the result is not one tensor)

    def arg(self, i: int, name: str, default: Any = None) -> Any:
        """Argument `i`, or the keyword `name`, or `default`."""
        return self.args[i] if len(self.args) > i else self.kwargs.get(name, default)
