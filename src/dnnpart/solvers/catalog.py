"""Imports every built-in method module so that each registers itself."""

from dnnpart.baselines import local_search, single_device  # noqa: F401
from dnnpart.solvers import (
    brute_force,  # noqa: F401
    dp,  # noqa: F401
)
