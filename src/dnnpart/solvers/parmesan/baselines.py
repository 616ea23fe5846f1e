"""Mapping baselines: consecutive (CS), p2p-first and random.

Devices are taken in the topology's own numbering (``0 .. D-1``), which is what
"consecutive devices" means for a hierarchy numbered node by node.
"""

from __future__ import annotations

import numpy as np

from dnnpart.stages import IntArray, PipelineStages


def cs_mapping(stages: PipelineStages) -> IntArray:
    """Consecutive stages on consecutive devices, the replicas of a stage together:
    replica ``r`` of stage ``s`` on device ``s * R + r``.

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]],
    ...                     replicas=2)
    >>> cs_mapping(st).tolist()
    [[0, 2], [1, 3]]
    """
    s_n, r_n = stages.n_stages, stages.replicas
    return (np.arange(s_n)[None, :] * r_n + np.arange(r_n)[:, None]).astype(np.int64)


def p2p_first_mapping(stages: PipelineStages) -> IntArray:
    """Each pipeline copy on consecutive devices: replica ``r`` of stage ``s`` on
    ``r * S + s``.

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]],
    ...                     replicas=2)
    >>> p2p_first_mapping(st).tolist()
    [[0, 1], [2, 3]]
    """
    s_n, r_n = stages.n_stages, stages.replicas
    return (np.arange(r_n)[:, None] * s_n + np.arange(s_n)[None, :]).astype(np.int64)


def random_mapping(stages: PipelineStages, seed: int | None = 0) -> IntArray:
    """A uniformly random bijection (seeded).

    Examples
    --------
    >>> st = PipelineStages(compute=[0, 0], param_bytes=[0, 0], comm_bytes=[[0, 1], [0, 0]])
    >>> sorted(random_mapping(st, seed=1).reshape(-1).tolist())
    [0, 1]
    """
    perm = np.random.default_rng(seed).permutation(stages.n_devices)
    return perm.reshape(stages.replicas, stages.n_stages).astype(np.int64)


BASELINES = {"cs": cs_mapping, "p2p-first": p2p_first_mapping}
