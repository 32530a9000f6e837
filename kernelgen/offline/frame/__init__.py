"""What the pointwise, row and matmul families share: the reference seen over the output's
[rows, cols] frame (every value per element, per row or scalar; each input full, a column, a row or
a scalar), its classification, the kernels' common emitter, the host path's data, the launch model
and the pruning rules they have in common."""
