"""One ATen call of a traced fx graph, as an op-table handler (kernelgen.offline.frontend.optable)
reads it, and the builder it adds IR values through (kernelgen.offline.frontend.fxwalk.IRBuilder)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kernelgen.offline.frontend.ir import Value


class Builder(Protocol):
    """What a handler may do to the IR being built: add a value, read one, turn an fx argument (a
    node, a Python number, a symbolic size) into a value, read an fx node's shape."""

    env: dict[Any, Any]  # fx node -> its value (or a Multi, a NoValue, a size expression)

    def add(self, op: str, args: tuple[int, ...] = (), shape: tuple = (), dtype: str = "float32", **attrs: Any) -> int: ...

    def v(self, i: int) -> Value: ...

    def scalar(self, value: Any) -> int: ...

    def operand(self, a: Any) -> int: ...

    def shape_of(self, fx_node: Any) -> tuple: ...


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
