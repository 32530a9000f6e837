"""What a run leaves behind for people: the per-operator state (state.json), optimization_log.md,
the speedup plot, the report over many operators, and the terminal tables."""
