"""OptCNN (paper 3, Jia et al. 2018): layer-wise parallelism found by node/edge elimination."""
