"""The hyper-parameters of a KernelBench-format problem's Model, read from the module the derived
reference builds (`_MODEL`, on the meta device): each submodule's `__constants__` (PyTorch's own list
of a module's hyper-parameters: a Conv2d's stride, padding, dilation, groups, kernel_size; a
LayerNorm's normalized_shape and eps; a GroupNorm's num_groups) and the Model's own plain attributes
(`self.multiplier = 2.0`, `self.dim = 1`).

They are split in two: constants the forward uses as they are (fixed for every input the problem
can be given), and the sizes the module was built with that its parameters carry (a Conv2d's
in_channels and out_channels): those follow the parameters' shapes, which the derived spec's smaller
test cases shrink.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.spec.model import OperatorSpec

# Constants that are sizes of the module's own tensors: they change with the parameters' shapes.
SIZE_CONSTANTS = frozenset({"in_channels", "out_channels", "in_features", "out_features", "num_features",
                            "num_channels", "num_embeddings", "embedding_dim"})
_NOISE = frozenset({"inplace", "training", "dump_patches", "call_super_init"})
_PLAIN = (int, float, bool, str)


class ModuleConstants(BaseModel):
    """One module of the problem's Model and its hyper-parameters, as text (`(1, 1)`, `0.1`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str  # the submodule's name in the Model ("conv2d", "layers.0"); "" for the Model itself
    kind: str  # its class: "Conv2d", "Model"
    fixed: dict[str, str] = Field(default_factory=dict)  # used by the forward as they are
    sizes: dict[str, str] = Field(default_factory=dict)  # carried by its parameters' shapes

    def describe(self) -> str:
        where = f"`{self.path}` ({self.kind})" if self.path else f"the {self.kind} itself"
        fixed = ", ".join(f"{k}={v}" for k, v in self.fixed.items())
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        text = f"{where}: {fixed}" if fixed else where
        return text + (f"; built with {sizes} (sizes its parameters carry: they follow the parameters' shapes)"
                       if sizes else "")


def _plain(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    return isinstance(value, (tuple, list)) and len(value) <= 8 and all(isinstance(v, (int, float, bool)) for v in value)


def _constants(module: Any, root: bool) -> tuple[dict[str, str], dict[str, str]]:
    names = list(getattr(type(module), "__constants__", ()) or ())
    if root or not names:
        names += [k for k in vars(module) if not k.startswith("_") and k not in names]
    fixed, sizes = {}, {}
    for name in names:
        if name in _NOISE or not hasattr(module, name):
            continue
        if name == "output_padding" and "Transpose" not in type(module).__name__:
            continue  # declared by every convolution, used only by the transposed ones
        value = getattr(module, name)
        if value is None or not _plain(value):
            continue
        (sizes if name in SIZE_CONSTANTS else fixed)[name] = repr(tuple(value) if isinstance(value, list) else value)
    return fixed, sizes


def problem_model(spec: OperatorSpec) -> Any | None:
    """The Model a derived spec's reference builds (on the meta device); None for any other spec."""
    from kernelgen.spec.kernelbench.readback import read_back
    from kernelgen.spec.reference import load_reference

    if read_back(spec) is None:
        return None
    try:
        return load_reference(spec).__globals__.get("_MODEL")
    except Exception:  # noqa: BLE001 - a reference edited into one that does not build: nothing to read
        return None


def module_constants(spec: OperatorSpec) -> list[ModuleConstants]:
    """The Model's hyper-parameters, module by module (containers and constant-free modules left out)."""
    model = problem_model(spec)
    if model is None:
        return []
    found = []
    for path, module in model.named_modules():
        fixed, sizes = _constants(module, root=path == "")
        if fixed or sizes:
            found.append(ModuleConstants(path=path, kind=type(module).__name__, fixed=fixed, sizes=sizes))
    return found
