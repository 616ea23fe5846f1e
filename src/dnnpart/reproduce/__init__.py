"""Regenerate the papers' tables and figures from their workloads."""

from dnnpart.reproduce.optcnn2018 import OptcnnReport, reproduce_optcnn2018
from dnnpart.reproduce.tarnawski2020 import Report, reproduce_tarnawski2020

__all__ = ["OptcnnReport", "Report", "reproduce_optcnn2018", "reproduce_tarnawski2020"]
