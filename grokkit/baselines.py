r"""Convex-programming baselines with cvxpy (paper §C.5), float64 on the CPU.

Basis pursuit uses CLARABEL (interior point, ~1e-8 accurate, 0.02 s at n = 100); ECOS is
not installed with cvxpy 1.9. Each function returns the solution and the solver's name
and status, so a notebook can say which solver produced its baseline. Results are cached
under ``$GROKKIT_CACHE`` when it is set (:mod:`grokkit.cache`).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from grokkit._checks import check_finite, check_int, check_option, check_range, check_seed, show
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


@dataclass(frozen=True)
class RecoverySweep:
    r"""Outcome of :func:`sparse_recovery_sweep`: ``error`` (T, S, K, trials) the relative recovery
    error :math:`\|b - b^*\|_2/\|b^*\|_2` of basis pursuit for each τ of ``tau`` (T,), s of ``s``
    (S,), N of ``N`` (K,) and trial; ``eps`` (None: the equality constraint) and the ``solver``;
    ``inaccurate`` the number of solves the solver flagged as inaccurate."""

    n: int
    s: np.ndarray
    N: np.ndarray
    tau: np.ndarray
    error: np.ndarray
    threshold: float
    eps: float | None
    solver: str
    inaccurate: int

    @property
    def mean_error(self) -> np.ndarray:
        """(T, S, K) the error averaged over the trials."""
        return self.error.mean(axis=-1)

    @property
    def N_min(self) -> np.ndarray:
        r"""(T, S) :math:`N_\min(s, \tau)`: the first N of the grid whose mean error is below
        ``threshold`` (the authors' rule in ``compressed_sensing.ipynb``); inf where no N of the grid reaches it."""
        below = self.mean_error < self.threshold
        return np.where(below.any(axis=-1), self.N[np.argmax(below, axis=-1)], np.inf)


@cached
def sparse_recovery_sweep(n: int, s_grid, N_grid, tau_grid, trials: int, *, eps: float | None = 1e-8,
                          variance: str = "1/N", threshold: float = 1e-6, solver: str = "CLARABEL",
                          seed: int = 0, progress: bool | None = None) -> RecoverySweep:
    r"""Recovery of a sparse :math:`b^*` by basis pursuit (P1) over a grid of sparsities s, numbers
    of measurements N and coherence parameters τ (paper §C.4–C.5, Figures 6 and 7).

    For each trial, one :math:`b^* \in \mathbb R^n` per s (:func:`grokkit.data.sparse.sparse_signal`) and
    one measurement matrix per (τ, N) (:func:`grokkit.data.sparse.measurement_matrix` with
    :math:`\Phi = I_n`, ``variance`` ``"1/N"`` as the authors' code or ``"1/n"`` as the paper,
    :math:`\lfloor\tau N\rfloor` rows canonical vectors) are drawn, seeded from ``seed``, the trial
    and the values of s, or of τ and N: the same :math:`b^*` across τ and N, the same X across s
    (common random numbers), and the same draws for the values two sweeps share. Noiseless
    :math:`y^* = \tilde Xb^*`; :func:`basis_pursuit` with ``eps``: None solves the paper's
    (P1-noiseless) :math:`\tilde Xb = y^*`, a number the authors' code's
    :math:`\|\tilde Xb - y^*\|_2 \le \varepsilon` (they use 1e-8). :math:`N_\min(s, \tau)` is read off
    with ``threshold`` (:attr:`RecoverySweep.N_min`)."""
    from grokkit import data
    from grokkit.kernels.run import Progress

    n = check_int("n", n, 1)
    s_grid = [check_int("s_grid", s, 1, n, high_name="n") for s in np.atleast_1d(s_grid)]
    N_grid = [check_int("N_grid", N, 1) for N in np.atleast_1d(N_grid)]
    tau_grid = [check_range("tau_grid", t, 0.0, 1.0) for t in np.atleast_1d(tau_grid)]
    for name, grid in (("s_grid", s_grid), ("N_grid", N_grid), ("tau_grid", tau_grid)):
        if not grid or any(b <= a for a, b in zip(grid, grid[1:])):
            raise ValueError(f"{name} must be a non-empty increasing list, got {show(list(grid))}")
    trials = check_int("trials", trials, 1)
    eps = None if eps is None else check_range("eps", eps, 0.0, closed="left")
    data.sparse._variance(variance, n, 1)
    threshold = check_range("threshold", threshold, 0.0, closed="neither")
    seed = check_seed("seed", seed)

    def draw_seed(*key):  # a seed for each value (not index) of the grid: sweeps share their common draws
        return int(np.random.SeedSequence([seed, *key]).generate_state(1)[0])

    phi = np.eye(n)
    error = np.empty((len(tau_grid), len(s_grid), len(N_grid), trials))
    inaccurate = 0
    bar = Progress("sparse_recovery_sweep", error.size, progress)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        for k in range(trials):
            stars = [data.sparse.sparse_signal(n, s, draw_seed(0, k, s)) for s in s_grid]
            for i, tau in enumerate(tau_grid):
                for j, N in enumerate(N_grid):
                    X = data.sparse.measurement_matrix(N, phi, tau, variance, draw_seed(1, k, N, round(tau * 10**6)))
                    for m, b_star in enumerate(stars):
                        sol = basis_pursuit.__wrapped__(X, X @ b_star, eps, solver)
                        inaccurate += sol.status != cp.OPTIMAL
                        error[i, m, j, k] = np.linalg.norm(sol.b - b_star) / np.linalg.norm(b_star)
                        bar.update(1)
    bar.close()
    return RecoverySweep(n=n, s=np.array(s_grid), N=np.array(N_grid), tau=np.array(tau_grid), error=error,
                         threshold=threshold, eps=eps, solver=solver, inaccurate=int(inaccurate))


# --- background: Lyu et al. (2024), max-margin linear classifiers (Corollaries 3.6, 3.7) -------


@dataclass(frozen=True)
class MarginSolution:
    r"""A max-:math:`\ell_p`-margin linear classifier: ``w`` (n,) with :math:`\|w\|_p = 1`,
    its ``margin`` :math:`\min_i y_i\langle w, x_i\rangle`, ``p``, the solver and its status."""

    w: np.ndarray
    margin: float
    p: int
    solver: str
    status: str


@cached
def max_margin(X: np.ndarray, y: np.ndarray, p: int, solver: str = "CLARABEL") -> MarginSolution:
    r"""The max-:math:`\ell_p`-margin linear classifier of Lyu et al. (§3.2.3), p ∈ {1, 2}:

    .. math:: w_p^* = \arg\max_{\|w\|_p = 1}\ \min_i y_i\langle w, x_i\rangle,

    computed as :math:`\bar w/\|\bar w\|_p` with :math:`\bar w` the solution of
    :math:`\min\|w\|_p` s.t. :math:`y_i\langle w, x_i\rangle \ge 1` for every i (the margin is
    then :math:`1/\|\bar w\|_p`). p = 1 is a linear program, the global optimum of their rich
    problem (R1) for the diagonal network (Corollary 3.7); p = 2 is the hard-margin SVM, the
    limit of their kernel regime (Corollary 3.6). The SVM is solved in the row space of X
    (:math:`\bar w = X^\top c`, the representer theorem), a quadratic program in N variables
    with the Gram matrix :math:`XX^\top`, so that n = 1e5 stays cheap.

    ``solver``: ``"CLARABEL"`` (cvxpy, interior point) or, for p = 1, ``"HIGHS"`` (the dual
    simplex of scipy's ``linprog``, which suits the N constraints of the program: 1 s at
    n = 1e4, N = 32, where CLARABEL takes 7 s, and 17 s at n = 1e5, where it takes 100 s).

    ``X`` (N, n) and ``y`` (N,) finite, ``y`` in {−1, +1}; data that no hyperplane through the
    origin separates raise ``ValueError`` (the program is infeasible).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != X.shape[:1]:
        raise ValueError(f"X and y must have shapes (N, n) and (N,), got {X.shape} and {y.shape}")
    check_finite("X", X)
    check_finite("y", y)
    if not np.all(np.abs(y) == 1.0):
        bad = y[np.abs(y) != 1.0][0]
        raise ValueError(f"y must hold labels in {{-1, +1}}, got {show(bad)}")
    if p not in (1, 2) or isinstance(p, bool):
        raise ValueError(f"p must be one of 1, 2, got {show(p)}")
    check_option("solver", solver, ("CLARABEL", "HIGHS") if p == 1 else ("CLARABEL",))
    if solver == "HIGHS":
        return _max_l1_margin_highs(X, y)
    if p == 1:                                                  # w = plus - minus, both >= 0
        plus, minus = cp.Variable(X.shape[1], nonneg=True), cp.Variable(X.shape[1], nonneg=True)
        problem = cp.Problem(cp.Minimize(cp.sum(plus) + cp.sum(minus)),
                             [cp.multiply(y, X @ (plus - minus)) >= 1])
    else:
        K = X @ X.T
        e, V = np.linalg.eigh(K)
        keep = e > e.max() * 1e-12
        B = np.sqrt(e[keep])[:, None] * V[:, keep].T           # K = BᵀB on its range
        c = cp.Variable(X.shape[0])
        problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(B @ c)), [cp.multiply(y, K @ c) >= 1])
    with warnings.catch_warnings():                 # an inaccurate solve shows in ``status``
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        problem.solve(solver=solver)
    if problem.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise ValueError("X, y must be linearly separable by a hyperplane through the origin, "
                         f"got data on which {solver} finds max_margin infeasible")
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"{solver} returned status {problem.status!r}")
    w_bar = np.asarray(plus.value - minus.value if p == 1 else X.T @ c.value, dtype=float)
    w_unit = w_bar / np.linalg.norm(w_bar, ord=p)
    return MarginSolution(w=w_unit, margin=float(np.min(y * (X @ w_unit))), p=p, solver=solver,
                          status=problem.status)


def _max_l1_margin_highs(X: np.ndarray, y: np.ndarray) -> MarginSolution:
    """:func:`max_margin` for p = 1 by scipy's HiGHS: min 1ᵀ(w₊ + w₋) s.t. y ⊙ X(w₊ − w₋) ≥ 1, w± ≥ 0."""
    from scipy.optimize import linprog

    signed = y[:, None] * X
    result = linprog(np.ones(2 * X.shape[1]), A_ub=-np.hstack([signed, -signed]), b_ub=-np.ones(X.shape[0]),
                     bounds=(0, None), method="highs")
    if result.status == 2:
        raise ValueError("X, y must be linearly separable by a hyperplane through the origin, "
                         "got data on which HIGHS finds max_margin infeasible")
    if result.status != 0:
        raise RuntimeError(f"HIGHS returned status {result.status}: {result.message}")
    w_bar = result.x[:X.shape[1]] - result.x[X.shape[1]:]
    w_unit = w_bar / np.abs(w_bar).sum()
    return MarginSolution(w=w_unit, margin=float(np.min(y * (X @ w_unit))), p=1, solver="HIGHS",
                          status="optimal")


# --- Matrix factorization: nuclear-norm minimisation (P5), App. D.5 ---------------------------
# Interior-point solvers are slow on nuclear-norm SDPs (CLARABEL: 42 s at 50×50
# on two cores): the default is SCS with tight tolerances (~1e-6 relative error at 50×50).


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
    from grokkit.theory.matrix import measurement_matrix

    op = np.asarray(operator)
    if op.dtype == bool:
        measurement_matrix(op, shape)  # checks the mask's shape
        i, j = np.nonzero(op)
        return A[i, j]
    return measurement_matrix(op, shape) @ cp.vec(A, order="F")


def _matrix_problem(operator, y, shape, solver, tol):
    from grokkit.theory.matrix import _shape

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
    the paper's (P4)/(P5) and the authors' code, which uses ε = 1e-6).

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


# --- Exact-recovery phase transitions of (P5): Theorems D.1-D.3 (App. D.4) ---------------------

COMPLETION_SAMPLINGS = ("uniform", "tau", "bernoulli", "local_coherence")
SEARCHES = ("bisect", "full")


@dataclass(frozen=True)
class CompletionSweep:
    r"""Outcome of :func:`completion_success` on a grid of K values of N and ``trials`` matrices.

    ``success`` (K, trials) bool: :math:`A^*` recovered, relative error
    :math:`\|\hat A - A^*\|_F/\|A^*\|_F` below ``threshold``; ``error`` (K, trials) that error where
    (P5) was solved, NaN where the outcome was inferred from a solved neighbour (``search="bisect"``);
    ``observed`` (K, trials) the number of observed entries; ``mu0`` (trials,) the coherence
    :math:`\mu_0` of each :math:`A^*` (:func:`grokkit.data.matrix.coherence_parameters`); ``solves`` the number
    of (P5) solved; the ``solver`` and its tolerance ``tol``."""

    N: np.ndarray
    success: np.ndarray
    error: np.ndarray
    observed: np.ndarray
    mu0: np.ndarray
    threshold: float
    solves: int
    solver: str
    tol: float | None

    @property
    def rate(self) -> np.ndarray:
        """(K,) the fraction of trials that recover :math:`A^*`."""
        return self.success.mean(axis=1)

    @property
    def N_min(self) -> np.ndarray:
        """(trials,) the smallest N of the grid that recovers each :math:`A^*` (inf if none does)."""
        first = np.argmax(self.success, axis=0)
        return np.where(self.success.any(axis=0), self.N[first], np.inf)


def _sweep_mask(A_star, N, sampling, tau, seed):
    from grokkit import data

    if sampling in ("uniform", "tau"):
        return data.matrix.completion_mask(A_star, N, tau if sampling == "tau" else 0.0, seed)
    kind = "uniform" if sampling == "bernoulli" else "local_coherence"
    return data.matrix.bernoulli_mask(data.matrix.sampling_probabilities(A_star, N, kind), seed)


@cached
def completion_success(n1: int, n2: int, r: int, N_grid, trials: int, *, generator: str = "orthogonal",
                       decay: float | None = None, sampling: str = "uniform", tau: float | None = None,
                       threshold: float = 1e-3, search: str = "bisect", solver: str = "SCS",
                       tol: float | None = 1e-6, seed: int = 0, progress: bool | None = None) -> CompletionSweep:
    r"""Exact recovery by nuclear-norm minimisation (P5) against the number N of observed entries:
    the numerical check of Theorems D.1 (Candès and Recht 2012, Thm 1.1), D.2 (their Thm 1.3) and
    D.3 (Chen et al. 2014), App. D.4-D.5.

    For each of ``trials`` matrices :math:`A^*` (:func:`grokkit.data.matrix.low_rank_matrix` with
    ``generator`` and ``decay``, singular values 1) and each N of the increasing ``N_grid``, the
    observed entries are drawn with ``sampling``, (P5) is solved noiselessly
    (:math:`\mathcal X(A) = y^*`, :func:`nuclear_norm_min` with ``solver`` and ``tol``) and the
    recovery succeeds when the relative error is below ``threshold``. ``sampling``:

    * ``"uniform"``: N distinct entries uniformly at random (Theorems D.1, D.2;
      :func:`grokkit.data.matrix.completion_mask` with τ = 0);
    * ``"tau"``: the paper's data selection with ``tau``: the :math:`\lfloor\tau N\rfloor` entries of
      largest :math:`\mu_i + \nu_j`, then uniformly among the others (:func:`grokkit.data.matrix.completion_mask`);
    * ``"bernoulli"``: each entry independently with probability :math:`N/(n_1n_2)`;
    * ``"local_coherence"``: each entry independently with :math:`p_{ij} = \min\{1, c(\mu_i+\nu_j)\}`,
      N observations expected (Theorem D.3; :func:`grokkit.data.matrix.sampling_probabilities`).

    Within a trial the masks are nested (one seed: a prefix of one permutation, or one uniform
    draw against increasing :math:`p_{ij}`; the τ rule only for τ ∈ {0, 1}), and if :math:`A^*` is
    the unique solution of (P5) for some entries it is for any superset. So success is monotone in
    N, and ``search="bisect"`` solves about :math:`\log_2 K` problems per trial to find the first
    success, the others' outcome following; ``search="full"`` solves every (N, trial). Seeds derive
    from ``seed``; a mask that observes nothing gives :math:`\hat A = 0` (error 1)."""
    from grokkit import data
    from grokkit.kernels.run import Progress

    n1, n2, r = data.matrix._check_shape(n1, n2, r)
    grid = [check_int("N_grid", N, 1, n1 * n2, high_name="n1*n2") for N in np.atleast_1d(N_grid)]
    if not grid or any(b <= a for a, b in zip(grid, grid[1:])):
        raise ValueError(f"N_grid must be a non-empty increasing list of integers, got {show(list(grid))}")
    trials = check_int("trials", trials, 1)
    check_option("generator", generator, data.matrix.GENERATORS)
    check_option("sampling", sampling, COMPLETION_SAMPLINGS)
    check_option("search", search, SEARCHES)
    if (sampling == "tau") != (tau is not None):
        raise ValueError(f"tau must be a number in [0, 1] for sampling 'tau' and None otherwise, got {show(tau)}")
    if tau is not None and check_range("tau", tau, 0.0, 1.0) not in (0.0, 1.0) and search == "bisect":
        raise ValueError(f"search must be 'full' for sampling 'tau' with 0 < tau < 1 (masks not nested), "
                         f"got {search!r}")
    threshold = check_range("threshold", threshold, 0.0, closed="neither")
    if tol is not None:
        check_range("tol", tol, 0.0, 1.0, closed="neither")
    rs = np.random.RandomState(check_seed("seed", seed))
    matrix_seeds, mask_seeds = rs.randint(0, 2**31 - 1, size=(2, trials))
    stars = [data.matrix.low_rank_matrix(n1, n2, r, generator=generator, decay=decay, seed=int(s)) for s in matrix_seeds]
    if sampling == "local_coherence":  # every N must be reachable, before any solve
        for A_star in stars:
            data.matrix.sampling_probabilities(A_star, grid[-1], "local_coherence")
    K = len(grid)
    error, observed = np.full((K, trials), np.nan), np.zeros((K, trials), dtype=int)
    success = np.zeros((K, trials), dtype=bool)
    bar = Progress("completion_success", trials * (K if search == "full" else max(1, K.bit_length())), progress)

    def solve(k, t):
        A_star = stars[t]
        mask = _sweep_mask(A_star, grid[k], sampling, tau, int(mask_seeds[t]))
        observed[k, t] = np.count_nonzero(mask)
        A = np.zeros_like(A_star)
        if observed[k, t]:
            A = nuclear_norm_min.__wrapped__(mask, A_star[mask], (n1, n2), None, solver, tol).A
        error[k, t] = np.linalg.norm(A - A_star) / np.linalg.norm(A_star)
        bar.update(1)
        return error[k, t] < threshold

    for t in range(trials):
        if search == "full":
            success[:, t] = [solve(k, t) for k in range(K)]
            continue
        lo, hi = -1, K  # fails at lo (or below the grid), succeeds at hi (or above it)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if solve(mid, t) else (mid, hi)
        success[hi:, t] = True
        for k in np.flatnonzero(np.isnan(error[:, t])):  # the counts of the masks not solved
            observed[k, t] = np.count_nonzero(_sweep_mask(stars[t], grid[k], sampling, tau, int(mask_seeds[t])))
    bar.close()
    mu0 = np.array([data.matrix.coherence_parameters(A_star, r)[0] for A_star in stars])
    return CompletionSweep(N=np.array(grid), success=success, error=error, observed=observed, mu0=mu0,
                           threshold=threshold, solves=int(np.count_nonzero(~np.isnan(error))),
                           solver=solver, tol=tol)


# --- background: Woodworth et al. (2020), the implicit regulariser as an exponential cone -----------

CLARABEL_TIGHT = dict(tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, max_iter=500)


@cached
def implicit_bias_cvxpy(X: np.ndarray, y: np.ndarray, init_scale: float, solver: str = "CLARABEL") -> Solution:
    r""":math:`\operatorname{argmin}_{X\beta = y}Q_\alpha(\beta)` for the depth-2 diagonal network (Woodworth et
    al. Theorem 1, :func:`grokkit.theory.background.implicit_bias` with ``depth=2``), α = ``init_scale``, as the
    exponential-cone program:

    .. math:: Q_\alpha(\beta) = \min_{p, m \ge 0,\ p - m = \beta}\ \sum_i p_i\log\frac{p_i}{\alpha^2} - p_i
              + m_i\log\frac{m_i}{\alpha^2} - m_i + 2\alpha^2,

    whose optimum has :math:`p_im_i = \alpha^4` (the flow's invariant :math:`w_{+,i}w_{-,i} = \alpha^2`,
    with :math:`p = w_+^2`, :math:`m = w_-^2`). Written with ``-cp.entr`` (DCP) in the variables scaled by
    α² (:math:`p = \alpha^2\tilde p`), minimising :math:`Q_\alpha/\alpha^2 - 2n = \sum\tilde p\log\tilde p - \tilde p + \dots`
    (the same argmin; with the factor α² or the constant the solver's gap test misfires at small α),
    solved by CLARABEL with its gaps and feasibility at 1e-12. ``Solution.b`` is β,
    ``value`` is :math:`Q_\alpha(\beta)`. Agrees with the dual Newton solve to ≈ 1e-8 relative for α in
    [1e-3, 1], 2e-6 at α = 10 (data of unit scale, d = 100, N = 40); below 1e-3 the solver fails.
    ``X``, ``y`` finite, ``init_scale`` > 0."""
    check_finite("X", X)
    check_finite("y", y)
    a2 = check_range("init_scale", init_scale, 0.0, closed="neither") ** 2
    n = X.shape[1]
    p, m = cp.Variable(n, nonneg=True), cp.Variable(n, nonneg=True)
    objective = cp.sum(-cp.entr(p) - p - cp.entr(m) - m)  # Q/α² − 2n: the factor and constant spoil the gap test
    problem = cp.Problem(cp.Minimize(objective), [a2 * (X @ (p - m)) == y])
    try:
        problem.solve(solver=solver, **(CLARABEL_TIGHT if solver == "CLARABEL" else {}))
    except cp.error.SolverError as error:
        raise RuntimeError(f"{solver} failed at init_scale {show(init_scale)}: {error}") from error
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"{solver} returned status {problem.status!r}")
    return Solution(b=a2 * np.asarray(p.value - m.value, dtype=float), solver=solver, status=problem.status,
                    value=a2 * (float(problem.value) + 2 * n))
