"""`kernelgen optimize`: diagnose the best kernel, propose one change, gate it through kernelgen.verify,
time it against the best, keep it only beyond the noise, and record the round."""
