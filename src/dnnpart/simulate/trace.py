"""Chrome-trace export of a :class:`~dnnpart.simulate.timeline.Timeline`.

The JSON object format of the Trace Event Format, which Perfetto (ui.perfetto.dev) and
``chrome://tracing`` open: one complete event (``"ph": "X"``) per interval with ``ts`` and
``dur`` in microseconds, ``pid`` 0 for devices and 1 for links / rings, ``tid`` the resource;
thread-name metadata events (``"M"``) name the rows; memory curves become counter events
(``"C"``). Every event carries ``name``, ``ph``, ``ts``, ``pid`` and ``tid``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dnnpart.simulate.timeline import COMPUTE, Timeline


def chrome_trace(timeline: Timeline, *, n_devices: int | None = None) -> dict[str, Any]:
    """The trace as a JSON-ready dict (``{"traceEvents": [...], "displayTimeUnit": "ms"}``).

    ``n_devices``: how many leading resources are devices (pid 0); default: those that run
    compute intervals.

    Examples
    --------
    >>> tl = Timeline(resources=("acc0",), resource=np.array([0]), start=np.array([0.0]),
    ...               end=np.array([2.0]), kind=("compute",), what=("matmul",))
    >>> [e for e in chrome_trace(tl)["traceEvents"] if e["ph"] == "X"]
    [{'name': 'matmul', 'cat': 'compute', 'ph': 'X', 'ts': 0.0, 'dur': 2000.0, 'pid': 0, 'tid': 0}]
    """
    us = timeline.time_unit_s * 1e6
    if n_devices is None:
        comp = [timeline.resource[k] for k in range(len(timeline)) if timeline.kind[k] == COMPUTE]
        n_devices = int(max(comp)) + 1 if comp else 0

    def pid(res: int) -> int:
        return 0 if res < n_devices else 1

    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": p, "tid": 0,
         "args": {"name": name}}
        for p, name in ((0, "devices"), (1, "links"))
    ]
    for r, name in enumerate(timeline.resources):
        events.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid(r), "tid": r,
                       "args": {"name": name}})
    start = timeline.start * us
    dur = np.maximum(timeline.end - timeline.start, 0.0) * us
    for k in range(len(timeline)):
        r = int(timeline.resource[k])
        events.append({"name": timeline.what[k], "cat": timeline.kind[k], "ph": "X",
                       "ts": float(start[k]), "dur": float(dur[k]), "pid": pid(r), "tid": r})
    names = list(timeline.resources)
    for dev_name, curve in timeline.memory.items():
        r = names.index(dev_name) if dev_name in names else 0
        points = [(0.0, curve.base), *zip((curve.times * us).tolist(), curve.after.tolist(),
                                          strict=True)]
        for ts, value in points:
            events.append({"name": f"memory {dev_name}", "ph": "C", "ts": float(ts),
                           "pid": pid(r), "tid": r, "args": {"bytes": float(value)}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(timeline: Timeline, path: str | Path) -> None:
    """Write :func:`chrome_trace` as JSON to ``path``."""
    from dnnpart.io.output_files import write_output  # a device, FIFO or "-" in place

    write_output(json.dumps(chrome_trace(timeline)), path, option="--trace")
