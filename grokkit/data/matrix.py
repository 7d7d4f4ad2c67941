r"""Matrix-factorization problems (paper §2, Appendix D: completion and sensing), and the
vectorisations, unfoldings and products of Appendix B that they are written with.

Conventions: :math:`n = n_1 n_2`; :math:`\operatorname{vec}` is column-major,
:math:`\operatorname{vec}(A)_{j n_1 + i} = A_{ij}` (``A.reshape(-1, order="F")``), as in the
paper's Lemma D.14 and the authors' ``np_vec``. Both problems read
:math:`y_s = X^{(1)\top}_s A^* X^{(2)}_s = (X^{(2)}\bullet X^{(1)})_s\operatorname{vec}A^*`;
completion keeps only the mask (never the N × n matrix X). Every draw uses its own
``numpy.random.RandomState(seed)`` in float64, as in :mod:`grokkit.data.sparse`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, check_seed, show
from grokkit.data.sparse import least_squares, noise

GENERATORS = ("authors", "orthogonal", "power_law", "spiky", "gaussian")
KINDS = ("completion", "sensing")
SENSING_VARIANCES = ("1/n_k", "1/n_k^2", "1/N")


def vec(A: np.ndarray) -> np.ndarray:
    r"""Column-major :math:`\operatorname{vec}(A) = \operatorname{vecc}(A)`: :math:`\operatorname{vec}(A)_{j n_1 + i} = A_{ij}`
    (Definition B.2); for a tensor :math:`T \in \mathbb R^{m\times n\times p}`, :math:`\operatorname{vecc}(T)_{kmn + jm + i} = T_{ijk}`
    (Definition B.3)."""
    return np.asarray(A).reshape(-1, order="F")


def vecr(A: np.ndarray) -> np.ndarray:
    r"""Row-major vectorisation (Definitions B.2, B.3): :math:`\operatorname{vecr}(M)_{in + j} = M_{ij}` for
    :math:`M \in \mathbb R^{m\times n}`, so :math:`\operatorname{vecr}(M) = \operatorname{vec}(M^\top) = K_{(m,n)}\operatorname{vec}(M)`
    (:func:`commutation_matrix`); :math:`\operatorname{vecr}(T)_{inp + jp + k} = T_{ijk}` for a tensor. (The paper
    prints the indices :math:`jm + i` and :math:`inp + jm + k`: typos: they are not one-to-one.)"""
    return np.asarray(A).reshape(-1, order="C")


def commutation_matrix(m: int, n: int) -> np.ndarray:
    r"""The commutation matrix :math:`K_{(m,n)} \in \{0, 1\}^{mn\times mn}` of Definition B.2:
    :math:`K_{(m,n)}\operatorname{vec}(M) = \operatorname{vec}(M^\top)` for every :math:`M \in \mathbb R^{m\times n}`, i.e. row
    :math:`in + j` has its 1 in column :math:`jm + i`."""
    m, n = check_int("m", m, 1), check_int("n", n, 1)
    i, j = np.divmod(np.arange(m * n), n)  # row i n + j of vec(M^T) holds M_ij
    K = np.zeros((m * n, m * n))
    K[i * n + j, j * m + i] = 1.0
    return K


UNFOLD_ORDERS = ("F", "C")


def unfold(T: np.ndarray, mode: int, order: str = "F") -> np.ndarray:
    r"""Mode-``mode`` unfolding :math:`T_{(k)}` of a tensor of order K (Definition B.3), k = 1 … K: row
    :math:`i_k`, one column per index of the other modes. ``order="F"``: the columns in column-major
    order of the remaining indices (the first varies fastest: Kolda and Bader's convention, where
    :math:`T_{(1)}[i, j + kn] = T_{ijk}`); ``order="C"``: row-major (the last fastest,
    :math:`T_{(1)}[i, jp + k] = T_{ijk}`, the paper's :math:`T^{(12)}` built from :math:`\operatorname{vecr}` of the slices).
    The order decides which Khatri–Rao order the CP identities take (:func:`cp_tensor`)."""
    T = np.asarray(T, dtype=float)
    check_finite("T", T)
    if T.ndim < 2:
        raise ValueError(f"T must be a tensor of order >= 2, got shape {T.shape}")
    mode = check_int("mode", mode, 1, T.ndim, high_name="the order of T")
    check_option("order", order, UNFOLD_ORDERS)
    return np.moveaxis(T, mode - 1, 0).reshape(T.shape[mode - 1], -1, order=order)


def mode_product(T: np.ndarray, M: np.ndarray, mode: int) -> np.ndarray:
    r"""The mode-k product :math:`T\times_k M` (Definition B.3): :math:`(T\times_k M)_{\dots q \dots} = \sum_{i_k} M_{q i_k}
    T_{\dots i_k \dots}`, so that :math:`(T\times_k M)_{(k)} = M\,T_{(k)}` in either :func:`unfold` order."""
    T, M = np.asarray(T, dtype=float), np.asarray(M, dtype=float)
    check_finite("T", T)
    check_finite("M", M)
    mode = check_int("mode", mode, 1, max(T.ndim, 1), high_name="the order of T")
    if M.ndim != 2 or M.shape[1] != T.shape[mode - 1]:
        raise ValueError(f"M must be a matrix with {T.shape[mode - 1]} columns (the size of mode {mode}), "
                         f"got shape {M.shape}")
    return np.moveaxis(np.tensordot(M, T, axes=(1, mode - 1)), 0, mode - 1)


def cp_tensor(*factors: np.ndarray) -> np.ndarray:
    r"""The CP tensor :math:`[\![A^{(1)}, \dots, A^{(K)}]\!] = \sum_{r=1}^R A^{(1)}_{:,r}\circ\cdots\circ A^{(K)}_{:,r}`
    (Definition B.3) from K >= 2 factor matrices with R columns each."""
    if len(factors) < 2:
        raise ValueError(f"factors must be at least 2 matrices, got {len(factors)}")
    mats = [np.asarray(F, dtype=float) for F in factors]
    for k, F in enumerate(mats, 1):
        check_finite(f"factor {k}", F)
        if F.ndim != 2 or F.shape[1] != mats[0].shape[1]:
            raise ValueError(f"factors must be matrices with the same number of columns, got shapes "
                             f"{[np.shape(G) for G in factors]}")
    out = mats[0]
    for F in mats[1:]:
        out = out[..., None, :] * F.reshape((1,) * (out.ndim - 1) + F.shape)
    return out.sum(axis=-1)


def unvec(a: np.ndarray, n1: int, n2: int) -> np.ndarray:
    r"""Inverse of :func:`vec`: the :math:`n_1\times n_2` matrix whose column-major vec is ``a``."""
    return np.asarray(a).reshape(n1, n2, order="F")


def _check_shape(n1: int, n2: int, r: int) -> tuple[int, int, int]:
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    r = check_int("r", r, 1, min(n1, n2), high_name="min(n1, n2)")
    return n1, n2, r


def _haar_columns(rs: np.random.RandomState, n: int, r: int, decay: float = 0.0) -> np.ndarray:
    r"""``r`` orthonormal columns: Q of a Gaussian (signs fixed), uniform (Haar) on the Stiefel
    manifold; with ``decay`` = γ > 0, Q of :math:`D G` with :math:`D = \operatorname{diag}(k^{-\gamma})`."""
    G = rs.randn(n, r)
    if decay:
        G *= np.arange(1, n + 1.0)[:, None] ** -decay
    q, R = np.linalg.qr(G)
    return q * np.where(np.diag(R) < 0, -1.0, 1.0)


def low_rank_matrix(n1: int, n2: int, r: int, *, generator: str = "authors",
                    singular_values: np.ndarray | None = None, decay: float | None = None,
                    seed: int = 0) -> np.ndarray:
    r"""Ground truth :math:`A^* \in \mathbb{R}^{n_1\times n_2}` of rank ``r``, float64.

    ``"authors"`` (the official ``get_matrices``): :math:`U_0 \in \mathbb{R}^{n_1\times r}` then
    :math:`V_0 \in \mathbb{R}^{n_2\times r}` i.i.d. :math:`\mathcal N(0, 1)` from
    ``RandomState(seed)``, :math:`W = U_0V_0^\top/\sqrt r` and
    :math:`A^* = W\sqrt{n_1n_2}/\|W\|_F`, so :math:`\|A^*\|_F = \sqrt{n_1 n_2}` and the singular
    values are random. (The authors draw in float32 from torch's RNG, and their ``seed=0`` is
    unseeded, so their matrices cannot be reproduced bit for bit.)
    ``"gaussian"``: the same draws without any normalisation, :math:`A^* = U_0V_0^\top`;
    for r = 1 the :math:`Y^* = u^*v^{*\top}`, :math:`u^*, v^* \sim \mathcal N(0, I)`, of
    Woodworth et al.'s Figure 5 (its singular value :math:`\|u^*\|\|v^*\|` is random).

    The other generators return :math:`A^* = U^*\Sigma^*V^{*\top}` with orthonormal
    :math:`U^*, V^*` (:math:`U^*` drawn first) and :math:`\Sigma^*` the ``singular_values``
    (default all 1; ``r`` positive finite numbers):

    * ``"orthogonal"``: the random orthogonal model of Definition D.1, :math:`U^*, V^*`
      Haar-distributed (Q of a Gaussian): low coherence.
    * ``"power_law"``: :math:`U^*` the Q of :math:`D_1G_1`, :math:`D_1 = \operatorname{diag}(i^{-\gamma})`,
      :math:`G_1` Gaussian (and :math:`V^*` from :math:`D_2G_2`), γ = ``decay`` ≥ 0 (default 1): the
      leverage scores decay along the rows and columns, so the first rows and columns are
      coherent (Theorems D.2, D.3). γ = 0 is ``"orthogonal"``, draw for draw.
    * ``"spiky"``: :math:`U^*, V^*` are r distinct canonical vectors, rows and columns drawn
      with ``RandomState(seed).choice``: :math:`A^* = \sum_k\sigma_k e_{i_k}e_{j_k}^\top`, r
      nonzero entries, the most coherent (:math:`\mu_0 = \max(n_1, n_2)/r`; for r = 1 the paper's
      :math:`e_ke_\ell^\top` after Theorem D.1).
    """
    n1, n2, r = _check_shape(n1, n2, r)
    check_option("generator", generator, GENERATORS)
    seed = check_seed("seed", seed)
    if singular_values is not None:
        if generator in ("authors", "gaussian"):
            raise ValueError(f"singular_values must be None for generator {generator!r}, "
                             f"got {show(singular_values)}")
        sigma = np.asarray(singular_values, dtype=float)
        if sigma.shape != (r,):
            raise ValueError(f"singular_values must have shape (r,) = ({r},), got shape {sigma.shape}")
        for v in sigma:
            check_range("singular_values", v, 0.0, closed="neither")
        check_finite("singular_values", sigma)
    else:
        sigma = np.ones(r)
    if decay is not None and generator != "power_law":
        raise ValueError(f"decay must be None for generator {generator!r}, got {show(decay)}")
    decay = 1.0 if decay is None else check_range("decay", decay, 0.0, closed="left")
    rs = np.random.RandomState(seed)
    if generator in ("authors", "gaussian"):
        U0, V0 = rs.randn(n1, r), rs.randn(n2, r)
        if generator == "gaussian":
            return U0 @ V0.T
        W = U0 @ V0.T / math.sqrt(r)
        return W * math.sqrt(n1 * n2) / np.linalg.norm(W)
    if generator == "spiky":
        A = np.zeros((n1, n2))
        A[rs.choice(n1, r, replace=False), rs.choice(n2, r, replace=False)] = sigma
        return A
    decay = decay if generator == "power_law" else 0.0
    U, V = _haar_columns(rs, n1, r, decay), _haar_columns(rs, n2, r, decay)
    return (U * sigma) @ V.T


def _finite_matrix(name: str, A) -> np.ndarray:
    """``A`` as a finite float64 matrix, else ``ValueError`` naming ``name``."""
    check_finite(name, A)
    A = np.asarray(A, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"{name} must be a matrix (2-d array), got shape {A.shape}")
    return A


def local_coherence(A: np.ndarray, r: int | None = None, *, U_basis: np.ndarray | None = None,
                    V_basis: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""Local coherences :math:`(\mu_i(A))_i, (\nu_j(A))_j` (Definitions D.3 and D.4, eqs. 96–97).

    With :math:`A = U\Sigma V^\top` the compact SVD of rank ``r`` (default
    ``numpy.linalg.matrix_rank(A)``, as the authors' ``calculate_local_coherence``):
    :math:`\mu_i = \frac{n_1}{r}\|U^\top u_i\|^2`, :math:`\nu_j = \frac{n_2}{r}\|V^\top v_j\|^2`,
    where :math:`u_i, v_j` are the columns of ``U_basis`` (:math:`n_1\times N_1`) and
    ``V_basis`` (:math:`n_2\times N_2`), the canonical bases by default (Definition D.3: then
    :math:`\|U^\top e_i\|^2` are the leverage scores, which sum to r, so
    :math:`\sum_i\mu_i = n_1` and :math:`\sum_j\nu_j = n_2`).
    """
    A = _finite_matrix("A", A)
    n1, n2 = A.shape
    r = int(np.linalg.matrix_rank(A)) if r is None else check_int("r", r, 1, min(n1, n2),
                                                                    high_name="min(n1, n2)")
    for name, B, m in (("U_basis", U_basis, n1), ("V_basis", V_basis, n2)):
        if B is not None:
            check_finite(name, B)
            if np.ndim(B) != 2 or np.shape(B)[0] != m:
                raise ValueError(f"{name} must be a matrix with {m} rows, got shape {np.shape(B)}")
    if r == 0:
        return np.zeros(n1 if U_basis is None else np.shape(U_basis)[1]), \
            np.zeros(n2 if V_basis is None else np.shape(V_basis)[1])
    U, _, Vt = np.linalg.svd(A, full_matrices=False)
    U, V = U[:, :r], Vt[:r].T
    PU = U if U_basis is None else np.asarray(U_basis, dtype=float).T @ U
    PV = V if V_basis is None else np.asarray(V_basis, dtype=float).T @ V
    return n1 / r * np.sum(PU**2, axis=1), n2 / r * np.sum(PV**2, axis=1)


def coherence_parameters(A: np.ndarray, r: int | None = None) -> tuple[float, float]:
    r"""Candès and Recht's coherences :math:`(\mu_0, \mu_1)` of A (App. D.4, before Theorem D.2).

    With the compact SVD :math:`A = U\Sigma V^\top` of rank ``r`` (default the numerical rank) and the
    local coherences of :func:`local_coherence`, :math:`\mu_0 = \max(\max_i\mu_i, \max_j\nu_j)`,
    the smallest valid bound, and :math:`\mu_1 = \sqrt{n_1n_2/r}\,\max_{ij}|[UV^\top]_{ij}|`, the
    smallest :math:`\mu_1` with :math:`\max_{ij}|[UV^\top]_{ij}| \le \mu_1\sqrt{r/(n_1n_2)}`. The paper's
    Cauchy–Schwarz argument gives :math:`\mu_1 \le \mu_0\sqrt r`."""
    mu, nu = local_coherence(A, r)
    A = np.asarray(A, dtype=float)
    n1, n2 = A.shape
    r = int(np.linalg.matrix_rank(A)) if r is None else r
    U, _, Vt = np.linalg.svd(A, full_matrices=False)
    E = U[:, :r] @ Vt[:r]
    return float(max(mu.max(), nu.max())), float(math.sqrt(n1 * n2 / r) * np.abs(E).max())


def random_coherences(n1: int, n2: int, r: int, draws: int, *, generator: str = "orthogonal",
                      decay: float | None = None, seed: int = 0) -> np.ndarray:
    r""":math:`(\mu_0, \mu_1)` (:func:`coherence_parameters`) of ``draws`` matrices
    :func:`low_rank_matrix` (``generator``, ``decay``) with seeds ``seed``, ``seed + 1``, …: an array
    (draws, 2), for the side fact :math:`\mu_1 \le \mu_0\sqrt r` of App. D.4 on random matrices."""
    draws = check_int("draws", draws, 1)
    seed = check_seed("seed", seed)
    check_seed("seed + draws - 1", seed + draws - 1)
    return np.array([coherence_parameters(low_rank_matrix(n1, n2, r, generator=generator, decay=decay,
                                                          seed=seed + k), r) for k in range(draws)])


SAMPLINGS = ("uniform", "local_coherence")


def sampling_probabilities(A_star: np.ndarray, N: float, sampling: str = "uniform") -> np.ndarray:
    r"""Probabilities :math:`p_{ij}` of observing each entry, independently, with
    :math:`\sum_{ij}p_{ij} = N` expected observations (Bernoulli sampling, Theorem D.3).

    ``"uniform"``: :math:`p_{ij} = N/(n_1n_2)`. ``"local_coherence"`` (Chen et al. 2014):
    :math:`p_{ij} = \min\{1, c\,(\mu_i + \nu_j)\}` with the local coherences of :math:`A^*`
    (:func:`local_coherence`, Definition D.3) and the one c that gives N expected observations
    (entries capped at 1 first). Theorem D.3 asks :math:`p_{ij} \ge \min\{c_0(\mu_i+\nu_j)r
    \log^2(n_1+n_2)/\min(n_1, n_2), 1\}`: this is that form at a given budget N. Entries with
    :math:`\mu_i + \nu_j = 0` are never observed, so N is at most their number of others.
    """
    A_star = _finite_matrix("A_star", A_star)
    n1, n2 = A_star.shape
    N = check_range("N", N, 0.0, n1 * n2, closed="right")
    check_option("sampling", sampling, SAMPLINGS)
    if sampling == "uniform":
        return np.full((n1, n2), N / (n1 * n2))
    mu, nu = local_coherence(A_star)
    w = mu[:, None] + nu[None, :]
    positive = int(np.count_nonzero(w > 0))
    if N > positive:
        raise ValueError(f"N must be at most the number of entries with mu_i + nu_j > 0 = {positive} "
                         f"for sampling 'local_coherence', got {show(N)}")
    # water-filling: saturate the k largest weights at 1, scale the rest by c = (N - k)/(their sum)
    desc = np.sort(w, axis=None)[::-1]
    rest = np.cumsum(desc[::-1])[::-1]            # rest[k] = sum of desc[k:]
    k = np.arange(desc.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (N - k) / rest
    ok = (k <= N) & (c * desc <= 1.0 + 1e-12)
    k0 = int(np.argmax(ok))
    return np.minimum(1.0, c[k0] * w)


def bernoulli_mask(probabilities: np.ndarray, seed: int = 0) -> np.ndarray:
    r"""Boolean mask observing entry (i, j) independently with probability :math:`p_{ij}`
    (Theorem D.3's sampling model): ``RandomState(seed).random_sample(shape) < p``. The number
    of observed entries is random, with mean :math:`\sum p_{ij}`."""
    check_finite("probabilities", probabilities)
    p = np.asarray(probabilities, dtype=float)
    if p.ndim != 2 or p.size == 0:
        raise ValueError(f"probabilities must be a non-empty matrix (2-d array), got shape {p.shape}")
    if p.min() < 0.0 or p.max() > 1.0:
        raise ValueError(f"probabilities must be in [0, 1], got entries in "
                         f"[{show(float(p.min()))}, {show(float(p.max()))}]")
    rs = np.random.RandomState(check_seed("seed", seed))
    return rs.random_sample(p.shape) < p


def _check_mask(mask: np.ndarray, n1: int, n2: int) -> np.ndarray:
    m = np.asarray(mask)
    if m.dtype != bool or m.shape != (n1, n2):
        raise ValueError(f"mask must be a boolean array of shape (n1, n2) = ({n1}, {n2}), "
                         f"got {m.dtype} array of shape {m.shape}")
    return m


def completion_mask(A_star: np.ndarray, N: int, tau: float = 0.0, seed: int = 0) -> np.ndarray:
    r"""Boolean mask of the N observed entries of :math:`A^*` (paper L166–168, Appendix D.4).

    Positions are numbered row-major, :math:`k = i n_2 + j`. ``tau = 0``: the first N of
    ``RandomState(seed).permutation(n1*n2)`` (uniform without replacement; the authors' rule
    and RNG order). ``tau > 0``: the :math:`N_\tau = \lfloor\tau N\rfloor` positions with the
    largest :math:`P_{ij} = \mu_i(A^*) + \nu_j(A^*)` (:func:`local_coherence`; order of
    ``argsort(P, axis=None)[::-1]``, as the authors), then :math:`N - N_\tau` drawn uniformly
    without replacement among the others with ``RandomState(seed).choice``.
    The selection is deterministic in the top part: ``tau = 1`` gives the N most coherent entries.
    """
    A_star = _finite_matrix("A_star", A_star)
    n1, n2 = A_star.shape
    N = check_int("N", N, 1, n1 * n2, high_name="n1*n2")
    tau = check_range("tau", tau, 0.0, 1.0)
    rs = np.random.RandomState(check_seed("seed", seed))
    n = n1 * n2
    if tau == 0.0:
        selected = rs.permutation(n)[:N]
    else:
        n_tau = math.floor(round(tau * N, 9))
        mu, nu = local_coherence(A_star)
        order = np.argsort((mu[:, None] + nu[None, :]), axis=None)[::-1]
        top, rest = order[:n_tau], order[n_tau:]
        selected = np.concatenate([top, rs.choice(rest, N - n_tau, replace=False)])
    mask = np.zeros(n, dtype=bool)
    mask[selected] = True
    return mask.reshape(n1, n2)


def completion_measurements(A: np.ndarray, mask: np.ndarray) -> np.ndarray:
    r"""Observed entries :math:`y_s = A_{i_sj_s}` in row-major order of the mask (same as ``A[mask]``).

    This is :math:`X\operatorname{vec}A` with :math:`X = X^{(2)}\bullet X^{(1)}`,
    :math:`X^{(1)}_s = e_{i_s}`, :math:`X^{(2)}_s = e_{j_s}` (Appendix D), without forming X."""
    A = _finite_matrix("A", A)
    return A[_check_mask(mask, *A.shape)]


def completion_masks(A_star: np.ndarray, N: int, tau, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""The masks and observed entries of a τ sweep (Appendix D.4, D.10), stacked for one batched
    kernel call: ``masks`` (G, n1, n2) with ``masks[g] = completion_mask(A_star, N, tau[g], seed)``
    and ``y`` (G, N) with ``y[g] = A_star[masks[g]]`` (row-major order of each mask).

    ``tau`` is a number or a grid of G values in [0, 1]; every mask observes the same N
    entries of the same :math:`A^*` (the operator :class:`grokkit.kernels.matrix.Measurements`
    accepts per-configuration masks of equal N), so the sweep is one call of
    :func:`grokkit.kernels.matrix.subgradient` with ``A_star`` shared."""
    A_star = _finite_matrix("A_star", A_star)
    check_int("N", N, 1, A_star.size, high_name="n1*n2")
    taus = check_grid("tau", tau, 0.0, 1.0, closed="both").reshape(-1)
    check_seed("seed", seed)
    masks = np.stack([completion_mask(A_star, N, t, seed) for t in taus])
    return masks, np.stack([A_star[m] for m in masks])


def _sensing_variance(variance: float | str, n_k: int, N: int) -> float:
    if isinstance(variance, str):
        check_option("variance", variance, SENSING_VARIANCES)
        return {"1/n_k": 1.0 / n_k, "1/n_k^2": 1.0 / n_k**2, "1/N": 1.0 / N}[variance]
    return check_range("variance", variance, 0.0, closed="neither")


def khatri_rao(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    r"""Column-wise Khatri–Rao product (Definition B.1): :math:`(P\star Q)_{:,i} = P_{:,i}\otimes Q_{:,i}`, for
    :math:`P \in \mathbb R^{m\times n}`, :math:`Q \in \mathbb R^{p\times n}`; :math:`P\star Q \in \mathbb R^{mp\times n}`, and
    :math:`P\bullet Q = (P^\top\star Q^\top)^\top` (:func:`face_splitting`)."""
    check_finite("P", P)
    check_finite("Q", Q)
    P, Q = np.asarray(P, dtype=float), np.asarray(Q, dtype=float)
    if P.ndim != 2 or Q.ndim != 2 or P.shape[1] != Q.shape[1]:
        raise ValueError(f"P and Q must be matrices with the same number of columns, got shapes {P.shape} and {Q.shape}")
    return face_splitting(P.T, Q.T).T


def face_splitting(P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    r"""Row-wise Khatri–Rao product :math:`(P\bullet Q)_{s,:} = P_{s,:}\otimes Q_{s,:}` (paper App. B)."""
    check_finite("P", P)
    check_finite("Q", Q)
    P, Q = np.asarray(P, dtype=float), np.asarray(Q, dtype=float)
    if P.ndim != 2 or Q.ndim != 2 or P.shape[0] != Q.shape[0]:
        raise ValueError(f"P and Q must be matrices with the same number of rows, got shapes {P.shape} and {Q.shape}")
    return (P[:, :, None] * Q[:, None, :]).reshape(P.shape[0], -1)


def sensing_matrices(A_star: np.ndarray, N: int, tau: float = 0.0, variance: float | str = "1/n_k",
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""Rank-one sensing factors :math:`X^{(1)} \in \mathbb{R}^{N\times n_1}`, :math:`X^{(2)} \in \mathbb{R}^{N\times n_2}` (Appendix D.4).

    The first :math:`N_1 = \min(\lfloor\tau N\rfloor, n_1)` rows of :math:`X^{(1)}` are the first
    columns of :math:`U^*` (full SVD of :math:`A^*`), the other rows i.i.d.
    :math:`\mathcal N(0, v)`; the same for :math:`X^{(2)}` with :math:`V^*` and :math:`n_2`
    (paper's rule; the authors' ``sparse_recovery/matrix_factorization.py`` picks random columns). The variance v is
    ``"1/n_k"`` (:math:`1/n_1` for :math:`X^{(1)}`, :math:`1/n_2` for :math:`X^{(2)}`: the
    authors' default), ``"1/n_k^2"`` (the paper's literal "σ = 1/n₁"), ``"1/N"`` (the
    authors' notebook) or a number. One ``RandomState(seed)`` draws :math:`X^{(1)}` then
    :math:`X^{(2)}` (the authors re-seed both, which correlates them when :math:`n_1 = n_2`).
    The measurement matrix is :math:`X = X^{(2)}\bullet X^{(1)}` (:func:`face_splitting`).
    """
    A_star = _finite_matrix("A_star", A_star)
    n1, n2 = A_star.shape
    N = check_int("N", N, 1)
    tau = check_range("tau", tau, 0.0, 1.0)
    v1, v2 = _sensing_variance(variance, n1, N), _sensing_variance(variance, n2, N)
    rs = np.random.RandomState(check_seed("seed", seed))
    U, _, Vt = np.linalg.svd(A_star)
    factors = []
    for basis, v in ((U, v1), (Vt.T, v2)):
        n_k = basis.shape[0]
        k = min(math.floor(round(tau * N, 9)), n_k)
        Xk = np.empty((N, n_k))
        Xk[:k] = basis[:, :k].T
        Xk[k:] = math.sqrt(v) * rs.randn(N - k, n_k)
        factors.append(Xk)
    return factors[0], factors[1]


@dataclass(frozen=True)
class Problem:
    r"""One matrix-factorization problem :math:`y = X\operatorname{vec}A^* + \xi` (paper §2, App. D), float64.

    ``kind == "completion"``: ``mask`` (n1, n2) bool holds the N observed entries and ``X`` is
    ``None`` (never built); ``y`` lists them in row-major order of the mask.
    ``kind == "sensing"``: ``X`` (N, n1·n2) is :math:`X^{(2)}\bullet X^{(1)}` acting on the
    column-major :func:`vec`, ``mask`` is ``None``. ``y_star`` is noiseless, ``y = y_star + xi``.
    """

    kind: str
    A_star: np.ndarray
    y_star: np.ndarray
    y: np.ndarray
    xi: np.ndarray
    mask: np.ndarray | None
    X: np.ndarray | None
    X1: np.ndarray | None
    X2: np.ndarray | None
    tau: float
    generator: str
    seed: int

    @property
    def n1(self) -> int:
        return self.A_star.shape[0]

    @property
    def n2(self) -> int:
        return self.A_star.shape[1]

    @property
    def r(self) -> int:
        return int(np.linalg.matrix_rank(self.A_star))

    @property
    def N(self) -> int:
        return self.y.shape[0]

    def apply(self, A: np.ndarray) -> np.ndarray:
        r""":math:`X\operatorname{vec}A` (for completion, the entries of A on the mask)."""
        if self.kind == "completion":
            return completion_measurements(A, self.mask)
        return self.X @ vec(A)

    def least_squares(self, beta2: float = 0.0) -> np.ndarray:
        r""":math:`\hat A = \operatorname{unvec}\big((X^\top X + \beta_2 I_n)^\dagger X^\top y\big)` (§2, Theorem D.10).

        For ``beta2 = 0`` the minimum-norm solution of :math:`X\operatorname{vec}A = y`. For
        completion :math:`X^\top X = \operatorname{diag}(\operatorname{vec}M)`, so
        :math:`\hat A = y/(1+\beta_2)` on the mask and 0 elsewhere (:math:`A^*` on the mask when
        noiseless and :math:`\beta_2 = 0`)."""
        beta2 = check_range("beta2", beta2, 0.0, closed="left")
        if self.kind == "completion":
            A_hat = np.zeros((self.n1, self.n2))
            A_hat[self.mask] = self.y / (1.0 + beta2)
            return A_hat
        return unvec(least_squares(self.X, self.y, beta2), self.n1, self.n2)

    @property
    def A_hat(self) -> np.ndarray:
        """The least-squares solution for ``beta2 = 0`` (:meth:`least_squares`)."""
        return self.least_squares(0.0)

    @property
    def lambda_max(self) -> float:
        r""":math:`\lambda_\max(X^\top X)` (the paper's :math:`\sigma_\max`; 1 for completion), for
        the step bound :math:`\alpha < 2/(\lambda_\max + \beta_2)` of Theorem 2.2."""
        if self.kind == "completion":
            return 1.0
        return float(np.linalg.norm(self.X, 2) ** 2)

    def local_coherence(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Local coherences :math:`(\mu_i(A^*)), (\nu_j(A^*))` (Definition D.3)."""
        return local_coherence(self.A_star)


def problem(n1: int = 10, n2: int = 10, r: int = 2, N: int = 80, *, kind: str = "completion",
                        tau: float = 0.0, generator: str = "authors", variance: float | str = "1/n_k",
                        snr: float | None = None, seed: int = 0) -> Problem:
    r"""Draw a matrix completion or sensing problem (paper §2, Appendix D).

    Parameters
    ----------
    n1, n2, r : matrix shape and rank (``1 <= r <= min(n1, n2)``).
    N : number of measurements (for completion at most ``n1*n2``: distinct entries).
    kind : ``"completion"`` (:func:`completion_mask`) or ``"sensing"`` (:func:`sensing_matrices`).
    tau : data-selection parameter in [0, 1] (local coherence for completion, first singular
        vectors for sensing; Appendix D.4).
    generator : ``"authors"`` (the official code, :math:`\|A^*\|_F = \sqrt{n_1n_2}`),
        ``"orthogonal"`` (Definition D.1, singular values 1), or the coherent ``"power_law"``
        (decay 1) and ``"spiky"``; see :func:`low_rank_matrix`.
    variance : sensing only: the Gaussian rows' variance (:func:`sensing_matrices`).
    snr : :math:`\|A^*\|_F^2/\mathbb E\|\xi\|^2` (:func:`grokkit.data.sparse.noise` with signal power
        :math:`\|A^*\|_F^2`); ``None`` is noiseless (every figure of the paper).
    seed : one integer in [0, 2**32 - 1] seeds :math:`A^*`, the measurements and the noise,
        each with its own generator, so the same seed gives the same problem everywhere.

    Every argument is checked before anything is drawn (``ValueError`` naming it).
    """
    n1, n2, r = _check_shape(n1, n2, r)
    kind = check_option("kind", kind, KINDS)
    N = check_int("N", N, 1, n1 * n2, high_name="n1*n2") if kind == "completion" else check_int("N", N, 1)
    tau = check_range("tau", tau, 0.0, 1.0)
    check_option("generator", generator, GENERATORS)
    seed = check_seed("seed", seed)
    _sensing_variance(variance, n1, N)
    if snr is not None:
        check_range("snr", snr, 0.0, closed="neither")
    A_star = low_rank_matrix(n1, n2, r, generator=generator, seed=seed)
    mask = X = X1 = X2 = None
    if kind == "completion":
        mask = completion_mask(A_star, N, tau, seed)
        y_star = completion_measurements(A_star, mask)
    else:
        X1, X2 = sensing_matrices(A_star, N, tau, variance, seed)
        X = face_splitting(X2, X1)
        y_star = X @ vec(A_star)
    xi = noise(N, snr, float(np.sum(A_star**2)), seed)
    return Problem(kind=kind, A_star=A_star, y_star=y_star, y=y_star + xi, xi=xi, mask=mask, X=X,
                         X1=X1, X2=X2, tau=tau, generator=generator, seed=seed)




def stack(problems, index=None) -> dict[str, np.ndarray]:
    r"""The operators, measurements and ground truths of several problems (one per seed, of one
    kind, shape and N) on a leading configuration axis, as the batched matrix kernels take them:
    ``kernels.matrix.subgradient(**stack(problems, index), shape=(n1, n2), alpha=…, …)``.

    ``index`` (G,) integers: configuration g gets ``problems[index[g]]``; None: each problem once.
    Returns ``operator`` (the masks (G, n1, n2), or the sensing X (G, N, n1·n2)), ``y`` (G, N) and
    ``A_star`` (G, n1, n2). ``ValueError`` for an empty list, problems that differ in kind, shape or
    N, or an index out of range.
    """
    problems = list(problems)
    if not problems or not all(isinstance(q, Problem) for q in problems):
        raise ValueError(f"problems must be a non-empty sequence of Problem, got {show(problems)}")
    first = problems[0]
    for q in problems[1:]:
        if (q.kind, q.A_star.shape, q.N) != (first.kind, first.A_star.shape, first.N):
            raise ValueError(f"problems must share kind, shape and N, got {(first.kind, first.A_star.shape, first.N)} "
                             f"and {(q.kind, q.A_star.shape, q.N)}")
    index = np.arange(len(problems)) if index is None else np.asarray(index)
    if index.ndim != 1 or index.size == 0 or not np.issubdtype(index.dtype, np.integer) \
            or index.min() < 0 or index.max() >= len(problems):
        raise ValueError(f"index must be a non-empty 1-d array of integers in [0, {len(problems) - 1}], "
                         f"got {show(index.tolist())}")
    operator = [q.mask if q.kind == "completion" else q.X for q in problems]
    return {"operator": np.stack(operator)[index], "y": np.stack([q.y for q in problems])[index],
            "A_star": np.stack([q.A_star for q in problems])[index]}
