"""The papers' baselines, registered like solvers (same signature, same result)."""
