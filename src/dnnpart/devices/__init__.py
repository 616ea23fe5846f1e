"""Devices, clusters and presets."""

from dnnpart.devices.cluster import ACCELERATOR, CPU, Cluster, Device
from dnnpart.devices.presets import PCIE3_X16_BANDWIDTH, reference_cluster, two_level_cluster

__all__ = [
    "ACCELERATOR",
    "CPU",
    "PCIE3_X16_BANDWIDTH",
    "Cluster",
    "Device",
    "reference_cluster",
    "two_level_cluster",
]
