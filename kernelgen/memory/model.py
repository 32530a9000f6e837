"""What the tuning memory holds: one typed entry per measured effect, and the JSON file a team shares."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field

# The JSON format's tag: a file without it is not an export of this memory (refused, not guessed at).
EXPORT_FORMAT = "kernelgen-tuning-memory"
# A knob's value as the optimize loop records it (bool first: pydantic keeps True a bool).
KnobValue = Union[bool, int, float, str, None]
Origin = Literal["measured", "imported"]


class MemoryEntry(BaseModel):
    """One knob value (or an LLM's change) timed against the kernel it would replace, on one perf
    case x dtype of one operator, on one device."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(min_length=1)  # the driver's name: "NVIDIA H100 80GB HBM3"
    capability: str = ""  # compute capability ("9.0"); ROCm: the gfx name
    torch_version: str = ""
    triton_version: str = ""
    family: str = Field(min_length=1)  # softmax | layernorm | rmsnorm | row_reduction | pointwise | matmul | an LLM spec's category
    shape_class: str = Field(min_length=1)  # kernelgen.memory.shapes.shape_class
    dtype: str = Field(min_length=1)
    knob: str = Field(min_length=1)  # "algorithm"; "change" for an LLM's whole-file proposal
    value: KnobValue = None
    speedup: float = Field(gt=0)  # the kernel it replaced / this one, timed interleaved in one process
    noise: float = Field(ge=0)  # the speedup had to leave 1 by more than this to count
    verdict: Literal["win", "loss", "neutral"]
    operator: str = Field(min_length=1)
    round: int = Field(ge=0)
    shapes: dict[str, list[int]] = Field(default_factory=dict)  # the perf case it was timed on
    origin: Origin = "measured"  # "imported": from another team's file, a hypothesis until re-timed here
    recorded_at: str = ""  # ISO time
    source: str = ""  # an imported entry: the file it came from

    @property
    def case(self) -> str:
        first = next(iter(self.shapes.values()), [])
        return f"{'x'.join(map(str, first))} {self.dtype}" if first else self.dtype

    def describe(self) -> str:
        """One line for a log or a prompt, the numbers first."""
        where = "measured here" if self.origin == "measured" else "imported, not re-timed here"
        return (f"{self.knob}={self.value!r}: x{self.speedup:.3f} (noise +-{100 * self.noise:.1f}%, {self.verdict}) on "
                f"{self.operator} {self.case} round {self.round} [{self.family}, {self.shape_class}; {where}]")


class MemoryExport(BaseModel):
    """`kernelgen memory export`'s file: entries of one or more devices, for `memory import` elsewhere."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["kernelgen-tuning-memory"]
    schema_version: int = Field(ge=1)
    exported_at: str = ""
    entries: list[MemoryEntry]
