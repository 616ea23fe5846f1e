"""Plans out: placement files, ``torch.distributed.pipelining`` split points and launches, per-device
torch stage modules and their distributed execution (:mod:`dnnpart.export.runtime`).

Only :mod:`~dnnpart.export.stages` and :mod:`~dnnpart.export.runtime` need torch; they
import it when called.
"""

from dnnpart.export.pipelining import launch_dict, split_points
from dnnpart.export.placement import operator_devices, placement_dict

__all__ = ["launch_dict", "operator_devices", "placement_dict", "split_points"]
