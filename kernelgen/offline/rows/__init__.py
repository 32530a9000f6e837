"""The row families (family.py): row reductions, softmax, layer and RMS norms over the last dim."""
