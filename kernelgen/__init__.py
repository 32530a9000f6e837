"""KernelGen: from an operator spec (YAML) to a verified, benchmarked and optimized Triton kernel."""

__version__ = "0.1.0"
