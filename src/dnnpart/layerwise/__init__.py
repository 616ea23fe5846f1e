"""Paper 3's layer model in the core: layer graphs, parallel configurations, their costs.

A :class:`~dnnpart.layerwise.layers.LayerGraph` lists a network's layers with shapes and
windows (:mod:`.layers`; built from a graph's layer attributes by :mod:`.graphs`); a layer's
parallel configurations cut its output into tiles on devices (:mod:`.configs`); the three
cost functions t_C, t_X, t_S price them with the devices' rooflines and the cluster's
bandwidth (:mod:`.costs`); :mod:`.tables` holds them per layer and edge and computes Eq. 1,
the one time of a layer-wise strategy every solver, evaluator and simulator reads
(:mod:`.strategy` for stored configurations). :mod:`.models` writes down the six networks of
the paper and :mod:`.hardware` its setting.
"""
