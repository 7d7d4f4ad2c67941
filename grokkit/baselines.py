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


# --- Matrix factorization: nuclear-norm minimisation (P5), App. D.5 ---------------------------
# Interior-point solvers are slow on nuclear-norm SDPs (CLARABEL: 42 s at 50×50, spec
# toolchain §4): the default is SCS with tight tolerances (~1e-6 relative error at 50×50).


@dataclass(frozen=True)
class MatrixSolution:
    """A cvxpy solution: ``A`` (n1, n2), the solver used, its status, the optimal value and the
    solver tolerance (``eps_abs = eps_rel`` for SCS; None for the solver's default)."""

    A: np.ndarray
    solver: str
    status: str
    value: float
    tol: float | None


def _measure(operator, shape, A: cp.Variable):
    """𝒳(A) as a cvxpy expression: ``A[mask]`` (row-major order) or ``X @ vec(A)`` (column-major)."""
    from grokkit.theory import measurement_matrix

    op = np.asarray(operator)
    if op.dtype == bool:
        measurement_matrix(op, shape)  # checks the mask's shape
        i, j = np.nonzero(op)
        return A[i, j]
    return measurement_matrix(op, shape) @ cp.vec(A, order="F")


def _matrix_problem(operator, y, shape, solver, tol):
    from grokkit.theory import _shape

    n1, n2 = _shape(shape)
    tol = None if tol is None else check_range("tol", tol, 0.0, 1.0, closed="neither")
    A = cp.Variable((n1, n2))
    measured = _measure(operator, shape, A)
    y = np.asarray(y, dtype=float)
    if y.shape != (measured.shape[0],):
        raise ValueError(f"y must have shape (N,) = ({measured.shape[0]},), got {y.shape}")
    check_finite("y", y)
    return A, measured, y, tol


def _solve_matrix(problem: cp.Problem, A: cp.Variable, solver: str, tol: float | None) -> MatrixSolution:
    options = {}
    if tol is not None and solver == "SCS":
        options = dict(eps_abs=tol, eps_rel=tol, max_iters=200_000)
    elif tol is not None and solver == "CLARABEL":
        options = dict(tol_gap_abs=tol, tol_gap_rel=tol, tol_feas=tol)
    problem.solve(solver=solver, **options)
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"{solver} returned status {problem.status!r}")
    return MatrixSolution(A=np.asarray(A.value, dtype=float), solver=solver, status=problem.status,
                          value=float(problem.value), tol=tol)


@cached
def nuclear_norm_min(operator, y: np.ndarray, shape, eps: float | None = None, solver: str = "SCS",
                     tol: float | None = 1e-9) -> MatrixSolution:
    r"""Nuclear-norm minimisation (P5), App. D.5: :math:`\min\|A\|_*` s.t. :math:`\mathcal X(A) = y^*`
    (``eps=None``, noiseless) or s.t. :math:`\|\mathcal X(A) - y^*\|_2 \le \varepsilon` (the noisy form:
    the paper's (P4)/(P5) and the authors' code, which uses ε = 1e-6; spec §3.8).

    ``operator``: a boolean mask of shape ``shape`` (completion, :math:`\mathcal X(A) = A[M]`) or a matrix
    (N, n1·n2) on the column-major vec(A) (sensing). ``tol``: the solver's tolerance (SCS
    ``eps_abs = eps_rel``); the result names the solver, its status and the tolerance."""
    eps = None if eps is None else check_range("eps", eps, 0.0, closed="left")
    A, measured, y, tol = _matrix_problem(operator, y, shape, solver, tol)
    constraint = [measured == y] if eps is None else [cp.norm(measured - y, 2) <= eps]
    return _solve_matrix(cp.Problem(cp.Minimize(cp.normNuc(A)), constraint), A, solver, tol)


@cached
def nuclear_norm_regularized(operator, y: np.ndarray, shape, beta_star: float, beta2: float = 0.0,
                             solver: str = "SCS", tol: float | None = 1e-9) -> MatrixSolution:
    r"""Minimiser of the paper's objective :math:`f(A) = \tfrac12\|\mathcal X(A) - y^*\|_2^2 + \tfrac{\beta_2}{2}\|A\|_F^2
    + \beta_*\|A\|_*` (Sec. 2, App. D), the fixed point of proximal gradient / SVT (eq. 127): the
    penalised counterpart of :func:`nuclear_norm_min` (by Lagrange duality, for β₂ = 0 it solves the
    ε-form with :math:`\varepsilon = \|\mathcal X(\hat A) - y^*\|_2`). Arguments as :func:`nuclear_norm_min`."""
    beta_star = check_range("beta_star", beta_star, 0.0, closed="left")
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    A, measured, y, tol = _matrix_problem(operator, y, shape, solver, tol)
    f = 0.5 * cp.sum_squares(measured - y) + 0.5 * beta2 * cp.sum_squares(A) + beta_star * cp.normNuc(A)
    return _solve_matrix(cp.Problem(cp.Minimize(f)), A, solver, tol)
