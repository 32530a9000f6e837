"""The host runtime generated kernel files import: what every family's file did the same way (the plan
cache, the lean launch, the layout arithmetic of a plan, device queries, the self-check driver).

Versioned and frozen by name: a verified kernel file imports `kernelgen.runtime.v1`, and its host
behaviour must not change under it when KernelGen is upgraded. A change of behaviour is a new module
(v2) that new files import; v1 stays as it is. The judge keys its verdicts on the kernel's bytes and
on the bytes of the runtime module it imports (kernelgen.verify.judge.judge.KernelSource), so the same
file under another runtime is judged again.

Nothing here imports kernelgen (torch, triton and the standard library only): the package is what a
kernel file may reach of KernelGen (kernelgen.verify.judge.allowlist), and `kernelgen export` inlines
the pieces a kernel uses (kernelgen.runtime.inline) where the file must run without KernelGen.
"""

CURRENT = "kernelgen.runtime.v1"  # what the offline generator's files import
SCRIPT = "kernelgen.runtime.script_v1"  # what their `__main__` self-check imports
