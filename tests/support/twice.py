"""The smallest spec a judge can time: x * 2 on one [8, 64] float32 case, for the tests of the baselines
timed ahead (tests/verify/test_baselines_ahead.py) and of the batch's stages (tests/batch/test_batch_stages.py)."""

SHAPES = {"x": [8, 64]}
SPEC = """name: twice
description: x times two
category: pointwise
inputs:
  - {name: x}
outputs:
  - {name: out}
reference: |
  def twice(x):
      return x * 2
dtypes: [float32]
test_cases:
  - {x: [8, 64]}
"""
