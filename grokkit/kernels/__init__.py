"""Batched PyTorch kernels: every hyper-parameter configuration of a grid is one row.

Sparse recovery here (:mod:`grokkit.kernels.sparse`, with the diagonal linear networks of the background chapter), matrix factorization in :mod:`grokkit.kernels.matrix`,
network training in :mod:`grokkit.kernels.nets`; all run in the loop of :mod:`grokkit.kernels.run`.
"""
from grokkit.kernels import matrix, nets
from grokkit.kernels.run import Trajectory, grid, log_schedule, resolve_device
from grokkit.kernels.sparse import (METHODS, deep, deep_factors, deep_step, diagonal_net, initial_point, ista,
                                    ista_step, projected_subgradient, projected_subgradient_step, signed_powers,
                                    soft_threshold, solve, subgradient, subgradient_step)

__all__ = ["matrix", "nets", "Trajectory", "grid", "log_schedule", "resolve_device", "METHODS", "solve", "subgradient",
           "projected_subgradient", "ista", "subgradient_step", "projected_subgradient_step", "ista_step",
           "soft_threshold", "initial_point", "deep", "deep_step", "deep_factors", "diagonal_net", "signed_powers"]
