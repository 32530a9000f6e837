"""The offline generator's front end, read by every family: the spec's reference traced once per
test case with symbolic shapes (trace.py), lowered to one IR (ir.py: values with symbolic shapes,
in topological order) through the op table, and each IR op's Triton expression (exprs.py)."""
