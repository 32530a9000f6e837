"""The matmul family (family.py): a 2-D matmul with a pointwise epilogue."""
