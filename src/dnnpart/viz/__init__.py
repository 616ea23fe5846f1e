"""Plots and reports; matplotlib is imported lazily (extra ``viz``)."""
