r"""Convex-programming baselines with cvxpy (paper §C.5), float64 on the CPU.

Basis pursuit uses CLARABEL (interior point, ~1e-8 accurate, 0.02 s at n = 100); ECOS is
not installed with cvxpy 1.9. Each function returns the solution and the solver's name
and status, so a notebook can say which solver produced its baseline. Results are cached
under ``$GROKKIT_CACHE`` when it is set (:mod:`grokkit.cache`).
"""
from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from grokkit._checks import check_finite, check_range
from grokkit.cache import cached


@dataclass(frozen=True)
class Solution:
    """A cvxpy solution: ``b`` (n,), the solver used, its status and the optimal value."""

    b: np.ndarray
    solver: str
    status: str
    value: float


def _solve(problem: cp.Problem, b: cp.Variable, solver: str) -> Solution:
    problem.solve(solver=solver)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"{solver} returned status {problem.status!r}")
    return Solution(b=np.asarray(b.value, dtype=float), solver=solver, status=problem.status,
                    value=float(problem.value))


@cached
def basis_pursuit(X: np.ndarray, y: np.ndarray, eps: float | None = None, solver: str = "CLARABEL") -> Solution:
    r"""Basis pursuit (P1): :math:`\min\|b\|_1` s.t. :math:`\tilde Xb = y^*` (``eps=None``, noiseless)
    or s.t. :math:`\|\tilde Xb - y^*\|_2 \le \varepsilon` (noisy, a second-order cone program)."""
    check_finite("X", X)
    check_finite("y", y)
    b = cp.Variable(X.shape[1])
    if eps is None:
        constraint = [X @ b == y]
    else:
        constraint = [cp.norm(X @ b - y, 2) <= check_range("eps", eps, 0.0, closed="left")]
    return _solve(cp.Problem(cp.Minimize(cp.norm(b, 1)), constraint), b, solver)


@cached
def lasso(X: np.ndarray, y: np.ndarray, beta1: float, beta2: float = 0.0, solver: str = "CLARABEL") -> Solution:
    r"""Minimiser of :math:`f(b) = \tfrac12\|\tilde Xb - y^*\|_2^2 + \tfrac{\beta_2}{2}\|b\|_2^2 + \beta_1\|b\|_1`,
    the fixed point of ISTA."""
    check_finite("X", X)
    check_finite("y", y)
    beta1 = check_range("beta1", beta1, 0.0, closed="left")
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    b = cp.Variable(X.shape[1])
    f = 0.5 * cp.sum_squares(X @ b - y) + 0.5 * beta2 * cp.sum_squares(b) + beta1 * cp.norm(b, 1)
    return _solve(cp.Problem(cp.Minimize(f)), b, solver)
