"""The command line's side of the KernelGen service (kernelgen.verify.judge.service): find or start
it, hand it the judging of `test`, `bench` and `new`'s round 0, and do the work in this process
whenever it cannot be used (KERNELGEN_NO_SERVICE=1, `--no-service`, busy, stale, not ours)."""
