"""Public helpers for tests: tiny graphs, problems, plan checks and brute-force oracles."""

from __future__ import annotations

from dnnpart.testing.factories import chain_graph, chain_problem, random_problem
from dnnpart.testing.subprocess_python import fresh_python, last_line

__all__ = ["chain_graph", "chain_problem", "fresh_python", "last_line", "random_problem"]
