"""KernelBench-format problem files (`class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`) as
operator specs: `derive_spec(path)` (derive.py) does it all; the modules read as the steps.

    source.py   read the file, name it (kb<level>_<number>_<slug>), run it with its sizes replaced
    record.py   how each tensor was drawn, learned on the meta device
    lift.py     inputs from get_inputs(), the module's parameters and buffers lifted into inputs
    shrink.py   small test cases from the problem's own sizes
    checks.py   no randomness in the forward; which 16-bit dtypes the reference runs in
    derive.py   all of it -> the spec and its readable YAML
    readback.py the problem behind a derived spec, read back from its reference (prompts, export)
"""

from kernelgen.spec.kernelbench.derive import DerivedSpec, derive_spec
from kernelgen.spec.kernelbench.source import problem_name

__all__ = ["DerivedSpec", "derive_spec", "problem_name"]
