"""Hybrid data x tensor x pipeline parallel plans of transformers (``plan --parallel``):
the exact search over :mod:`dnnpart.pricing.parallel`'s cost model."""

from dnnpart.solvers.hybrid.search import HybridResult, SearchSpace, best_split, search_parallel

__all__ = ["HybridResult", "SearchSpace", "best_split", "search_parallel"]
