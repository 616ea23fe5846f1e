"""Analytic cost model: per-operator FLOPs and bytes, roofline device times, link transfers.

Presets of devices and links live in ``presets.yaml`` (package data), each value with its
source; :func:`load_catalog` reads them, or a user's file merged over them.
"""

from dnnpart.cost.clusters import PricedCluster, resolve_cluster, shorthand_cluster
from dnnpart.cost.model import TIME_UNIT, CostModel, device_time_s, roofline_time_s, transfer_time_s
from dnnpart.cost.ops import OpSpec, Work, canonical_op, numel, op_class, operator_work
from dnnpart.cost.specs import Catalog, DeviceSpec, LinkSpec, load_catalog, parse_catalog

__all__ = [
    "TIME_UNIT",
    "Catalog",
    "CostModel",
    "DeviceSpec",
    "LinkSpec",
    "OpSpec",
    "PricedCluster",
    "Work",
    "canonical_op",
    "device_time_s",
    "load_catalog",
    "numel",
    "op_class",
    "operator_work",
    "parse_catalog",
    "resolve_cluster",
    "roofline_time_s",
    "shorthand_cluster",
    "transfer_time_s",
]
