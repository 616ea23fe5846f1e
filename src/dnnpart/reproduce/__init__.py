"""Regenerate the papers' tables and figures from their workloads."""

from dnnpart.reproduce.tarnawski2020 import Report, reproduce_tarnawski2020

__all__ = ["Report", "reproduce_tarnawski2020"]
