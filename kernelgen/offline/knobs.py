"""What every family's knobs share: a typed, frozen pydantic model whose fields list their
candidate values, and one way to resolve what a caller gives into that model.

`None` means: the generated file keeps its shape-aware heuristic for that knob (its launch helper
picks it per call). Any other value is baked in as a constant. The first candidate of every knob is
its default; the optimize loop changes one knob at a time from the family's `space()`. Knobs are
stored in state.json, so every model round-trips through JSON (`model_dump` / `model_validate`).

Two kinds of knob: most are launch constants (block sizes, warps, stages: a dispatch table gives
each shape its own), while those a model lists in `code_knobs` change the kernel's text (the
algorithm, the erf, the eviction hint, a persistent loop, the grid's rank): a file whose dispatch
table uses several values of one holds a @triton.jit function per combination
(kernelgen.offline.dispatch). Each family's model sits in its folder (pointwise/knobs.py, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

# A stage count, a threshold or a group size: a positive int (True is not 512).
Count = Annotated[int, Field(strict=True, gt=0)]


def _power_of_two(n: int) -> int:
    if n & (n - 1):
        raise ValueError("must be a power of two (tl.arange and num_warps take nothing else)")
    return n


# A block size or a warp count: Triton takes powers of two only.
Pow2 = Annotated[Count, AfterValidator(_power_of_two)]


def candidates(default: Any, *others: Any) -> Any:
    """A knob's field: its default and the values the optimize loop tries, default first."""
    return Field(default=default, json_schema_extra={"candidates": [default, *others]})


class KnobsModel(BaseModel):
    """A family's knobs. Subclasses declare fields with `candidates(...)` and name their code knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    code_knobs: ClassVar[tuple[str, ...]] = ()  # the knobs that change the kernel's text, not its launch

    @classmethod
    def space(cls) -> dict[str, list[Any]]:
        return {name: list(f.json_schema_extra["candidates"]) for name, f in cls.model_fields.items()}  # type: ignore[index]

    def code_key(self) -> tuple:
        """The values of the knobs that change the kernel's text."""
        return tuple(getattr(self, k) for k in self.code_knobs)


def resolve_knobs(cls: type[KnobsModel], family: str, knobs: KnobsModel | Mapping[str, Any] | None) -> KnobsModel:
    """`cls`: a typed model as is, or its defaults overridden by a dict of knobs. Unknown knobs, bad
    values, or another family's model are a ValueError that names them (`family`: the label the
    caller knows the spec by, e.g. "softmax")."""
    if isinstance(knobs, KnobsModel):
        if not isinstance(knobs, cls):
            raise ValueError(f"{type(knobs).__name__} given for the {family} family, which takes {cls.__name__}")
        return knobs
    given = dict(knobs or {})
    unknown = [k for k in given if k not in cls.model_fields]
    if unknown:
        raise ValueError(f"unknown knob {unknown[0]!r} for the {family} family; known: {', '.join(cls.model_fields)}")
    try:
        return cls.model_validate(given)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        raise ValueError(f"knob {name}={given.get(name)!r} is not valid for the {family} family: {err['msg']} "
                         f"(candidates: {cls.space().get(name)})") from None
