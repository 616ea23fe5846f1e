"""Readers and writers: the dnn-partitioning JSON format, our own plan/graph formats.

Untrusted input is validated here and turned into :class:`~dnnpart.errors.FormatError`
messages that start with the path of the offending field.
"""

from dnnpart.io.cluster_file import parse_cluster, read_cluster
from dnnpart.io.dnn_partitioning import parse_problem, read_problem, write_problem
from dnnpart.io.loader import load_file
from dnnpart.io.plan_files import parse_plan, plan_to_dict, read_plan, write_plan

__all__ = [
    "load_file",
    "parse_cluster",
    "parse_plan",
    "parse_problem",
    "plan_to_dict",
    "read_cluster",
    "read_plan",
    "read_problem",
    "write_plan",
    "write_problem",
]
