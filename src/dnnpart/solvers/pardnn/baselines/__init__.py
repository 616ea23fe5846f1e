"""Paper 2's baselines: the CP heuristic, linear clustering + GLB, and round-robin placement."""
