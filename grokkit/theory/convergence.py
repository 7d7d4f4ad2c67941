r"""The subgradient method's guarantees, the same for vectors and for matrices: Theorems C.3, C.13
and C.14 (sparse recovery) and Theorems D.4, D.13 and Corollary D.1 (matrix factorization).

The step sizes are the kernels' :math:`\alpha_t = \alpha(1+b)/(b+t)` (:func:`grokkit.kernels.run.step_size`),
``alpha_decay`` = b, None for the constant step.
"""
from __future__ import annotations

import numpy as np

from grokkit._checks import check_grid, check_int, check_range
from grokkit.kernels.run import MAX_STEPS, step_size


def step_size_sums(alpha, T, alpha_decay=None) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\sum_{t=1}^T\alpha_t` and :math:`\sum_{t=1}^T\alpha_t^2` for the kernels' steps
    :math:`\alpha_t = \alpha(1+b)/(b+t)` (``alpha_decay`` = b in [0, inf], :func:`grokkit.kernels.run.step_size`;
    None or inf: the constant step α), the sums of Theorems D.4 and D.13 and Corollary D.1.

    ``T`` (K,) counts updates (integers ≥ 1); ``alpha`` and ``alpha_decay`` are scalars or one per
    configuration (G,). Returns two arrays of shape (G, K) (or (K,) for scalars). Exact sums of the
    same float64 steps as the kernels, accumulated in chunks of 10⁶ terms: the cost is O(G max T),
    like the run itself."""
    alpha = check_grid("alpha", alpha, 0.0)
    decay = np.full_like(alpha, np.inf) if alpha_decay is None else check_grid("alpha_decay", alpha_decay, 0.0,
                                                                                  closed="both")
    alpha, decay = np.broadcast_arrays(alpha, decay)
    if alpha.ndim > 1:
        raise ValueError(f"alpha and alpha_decay must be scalars or one per configuration (G,), "
                         f"got shape {alpha.shape}")
    T_array = np.atleast_1d(np.asarray(T))
    T = np.array([check_int("T", t, 1, MAX_STEPS) for t in T_array.ravel()], dtype=np.int64).reshape(T_array.shape)
    if T.ndim != 1:
        raise ValueError(f"T must be a scalar or 1-D (K,), got shape {T.shape}")
    flat_a, flat_b = np.atleast_1d(alpha), np.atleast_1d(decay)
    sums = np.zeros((2, flat_a.size, T.size))
    order = np.argsort(T)
    total, done, chunk = np.zeros((2, flat_a.size)), 0, 10**6
    for k in order:  # T ascending: extend the running sums to T[k]
        while done < T[k]:
            t = np.arange(done + 1, min(done + chunk, T[k]) + 1, dtype=float)
            steps = step_size(flat_a[:, None], flat_b[:, None], t)
            total += [steps.sum(axis=1), (steps**2).sum(axis=1)]
            done = int(t[-1])
        sums[:, :, k] = total
    sums = sums.reshape((2,) + alpha.shape + T.shape)
    return sums[0], sums[1]


def _column(v: np.ndarray) -> np.ndarray:
    """A per-configuration array (G,) as a (G, 1) column against the T axis; scalars and (G, K) as they are."""
    return v[:, None] if v.ndim == 1 else v


def _bound_inputs(dist0, L, alpha, T, alpha_decay):
    """``dist0`` and ``L`` checked, as columns (:func:`_column`), with the step sums (K,) or (G, K)."""
    dist0 = check_grid("dist0", dist0, 0.0, closed="left")
    L = check_grid("L", L, 0.0, closed="left")
    if dist0.ndim > 1 or L.ndim > 2:
        raise ValueError(f"dist0 must be a scalar or (G,) and L a scalar, (G,) or (G, K), got shapes "
                         f"{dist0.shape} and {L.shape}")
    s1, s2 = step_size_sums(alpha, T, alpha_decay)
    return _column(dist0), _column(L), s1, s2


def subgradient_gap_bound(dist0, L, alpha, T, alpha_decay=None) -> np.ndarray:
    r"""Theorem D.4: :math:`f_{\rm best}^{(T)} - f(A^*) \le \dfrac{\|A^{(1)} - A^*\|_F^2 + L^2\sum_{t\le T}\alpha_t^2}
    {2\sum_{t\le T}\alpha_t}`, with :math:`f_{\rm best}^{(T)} = \min_{t\le T}f(A^{(t)})` over the iterates
    :math:`A^{(1)}, \dots, A^{(T)}` and :math:`L \ge \max_{t\le T}\|F(A^{(t)})\|_F` (all the proof uses).

    ``dist0`` = :math:`\|A^{(1)} - A^*\|_F` (any reference point A* in place of the ground truth: the
    proof only uses the subgradient inequality at it); ``T`` (K,) the number of iterates (the kernels'
    record at step k holds :math:`A^{(k+1)}`, so T = k + 1); ``alpha``, ``alpha_decay`` as
    :func:`step_size_sums`; ``dist0`` a scalar or (G,), ``L`` a scalar, (G,) or (G, K) (one
    configuration's L along T is (1, K)). Shape (G, K), or (K,) when every input is per T or scalar."""
    dist0, L, s1, s2 = _bound_inputs(dist0, L, alpha, T, alpha_decay)
    return (dist0**2 + L**2 * s2) / (2.0 * s1)


def subgradient_gap_limit(L, alpha, alpha_decay=None) -> np.ndarray:
    r"""Corollary D.1, the limit T → ∞ of :func:`subgradient_gap_bound`: :math:`L^2\alpha/2` for the
    constant step (eq. 104; ``alpha_decay`` None or inf), 0 for the square-summable but not summable
    steps :math:`\alpha_t = \alpha(1+b)/(b+t)` (eq. 105). Broadcasts over (G,) arrays."""
    L, alpha = check_grid("L", L, 0.0, closed="left"), check_grid("alpha", alpha, 0.0)
    decay = np.inf if alpha_decay is None else check_grid("alpha_decay", alpha_decay, 0.0, closed="both")
    return np.where(np.isinf(decay), L**2 * alpha / 2.0, 0.0)


def norm_gap_bound(dist0, L, alpha, T, beta_star, alpha_decay=None, xi_norm=0.0, beta2=0.0,
                      A_star_norm=0.0) -> np.ndarray:
    r"""Theorem D.13: :math:`\min_{t\le T}(\|A^{(t)}\|_* - \|A^*\|_*) \le
    \dfrac{\|A^{(1)} - A^*\|_F^2 + L^2\sum_{t\le T}\alpha_t^2}{2\beta_*\sum_{t\le T}\alpha_t}
    + \dfrac{\|\xi\|_2^2 + \beta_2\|A^*\|_F^2}{2\beta_*}`, with :math:`L = \max_{t\le T}\|F(A^{(t)})\|_F`
    (the paper's :math:`\max_t\|\nabla_Af(A^{(t)})\|_F`). With :math:`\beta_1`, :math:`\|b\|_1` and
    :math:`\|b^*\|_2` in place of :math:`\beta_*`, :math:`\|A\|_*` and :math:`\|A^*\|_F` it is Theorem C.13,
    its vector analogue (the same formula).

    It is :func:`subgradient_gap_bound` divided by β* plus the second term, because
    :math:`\beta_*\|A\|_* \le f(A)` and :math:`f(A^*) = \beta_*\|A^*\|_* + \tfrac{\beta_2}2\|A^*\|_F^2 + \tfrac12\|\xi\|_2^2`.
    ``xi_norm`` = :math:`\|\xi\|_2`, ``A_star_norm`` = :math:`\|A^*\|_F`; ``beta_star`` > 0 and ``beta2``
    scalars or (G,); the other arguments as :func:`subgradient_gap_bound`. Shape (G, K)."""
    beta_star = check_grid("beta_star", beta_star, 0.0)
    beta2 = check_grid("beta2", beta2, 0.0, closed="left")
    xi_norm = check_range("xi_norm", xi_norm, 0.0, closed="left")
    A_star_norm = check_range("A_star_norm", A_star_norm, 0.0, closed="left")
    gap = subgradient_gap_bound(dist0, L, alpha, T, alpha_decay)
    return (gap + 0.5 * (xi_norm**2 + _column(beta2) * A_star_norm**2)) / _column(beta_star)
