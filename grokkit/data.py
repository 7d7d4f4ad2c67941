r"""Sparse-recovery problems (paper §2 and Appendix C.4–C.5).

The measurements are :math:`y^* = \tilde X b^* + \xi` with :math:`\tilde X = X\Phi`,
:math:`\|b^*\|_0 = s`. Every draw uses its own ``numpy.random.RandomState(seed)`` in
float64 on the CPU, in the order of the authors' generators, so the same seed gives
the same problem on any device (and the authors' regression values, spec §3.7).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from grokkit._checks import check_finite, check_int, check_option, check_range, check_seed
from grokkit.kernels.run import resolve_device

BASES = ("identity", "orthonormal", "dct")


def dictionary(n: int, kind: str = "identity", seed: int = 0) -> np.ndarray:
    r"""Orthonormal dictionary :math:`\Phi \in \mathbb{R}^{n\times n}` (columns are atoms).

    ``"identity"``; ``"orthonormal"``: Q of the QR decomposition of a Gaussian matrix
    (seeded); ``"dct"``: the orthonormal DCT-II atoms
    :math:`\Phi_{jk} = \sqrt{2/n}\,c_k\cos(\pi(2j+1)k/2n)`, :math:`c_0 = 1/\sqrt2`.
    """
    n = check_int("n", n, 1)
    check_option("basis", kind, BASES)
    seed = check_seed("seed", seed)
    if kind == "identity":
        return np.eye(n)
    if kind == "orthonormal":
        q, r = np.linalg.qr(np.random.RandomState(seed).randn(n, n))
        return q * np.sign(np.diag(r))
    j, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    phi = np.sqrt(2.0 / n) * np.cos(np.pi * (2 * j + 1) * k / (2 * n))
    phi[:, 0] /= np.sqrt(2.0)
    return phi


def sparse_signal(n: int, s: int, seed: int = 0) -> np.ndarray:
    r"""Sparse :math:`b^*`: ``s`` entries at random positions, values :math:`\mathcal N(0, 1/n)` (§C.5)."""
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n)
    rs = np.random.RandomState(check_seed("seed", seed))
    support = rs.choice(n, s, replace=False)
    values = rs.randn(s)
    while not values.any():
        values = rs.randn(s)
    b_star = np.zeros(n)
    b_star[support] = values / np.sqrt(n)
    return b_star


def coherent_rows(tau: float, N: int, n: int) -> int:
    r"""Number of rows taken from the basis: :math:`N_1 = \min(\lfloor\tau N\rfloor, n)` (§C.10)."""
    tau, N, n = check_range("tau", tau, 0.0, 1.0), check_int("N", N, 1), check_int("n", n, 1)
    return min(math.floor(round(tau * N, 9)), n)


def measurement_matrix(N: int, phi: np.ndarray, tau: float = 0.0, variance: float | str = "1/n",
                       seed: int = 0) -> np.ndarray:
    r"""Measurement matrix :math:`X \in \mathbb{R}^{N\times n}` with coherence parameter :math:`\tau`.

    The first :math:`N_1 = \min(\lfloor\tau N\rfloor, n)` rows are atoms of :math:`\Phi`
    (distinct, chosen at random), the others are i.i.d. :math:`\mathcal N(0, \sigma^2)`.
    ``variance`` is :math:`\sigma^2`: a number, ``"1/n"`` (the paper, §C.5) or ``"1/N"``
    (the authors' code).
    """
    check_finite("phi", phi)
    n = phi.shape[0]
    N = check_int("N", N, 1)
    tau = check_range("tau", tau, 0.0, 1.0)
    sigma2 = _variance(variance, n, N)
    rs = np.random.RandomState(check_seed("seed", seed))
    n1 = coherent_rows(tau, N, n)
    X = np.empty((N, n))
    if n1:
        X[:n1] = phi[:, rs.choice(n, n1, replace=False)].T
    X[n1:] = np.sqrt(sigma2) * rs.randn(N - n1, n)
    return X


def _variance(variance: float | str, n: int, N: int) -> float:
    if isinstance(variance, str):
        check_option("variance", variance, ("1/n", "1/N"))
        return 1.0 / n if variance == "1/n" else 1.0 / N
    return check_range("variance", variance, 0.0, closed="neither")


def noise(N: int, snr: float | None, signal_power: float, seed: int = 0) -> np.ndarray:
    r"""Gaussian noise :math:`\xi` with :math:`\mathbb E\|b^*\|^2/\mathbb E\|\xi\|^2 = \mathrm{snr}`.

    ``snr=None`` is noiseless. ``signal_power`` is :math:`\mathbb E\|b^*\|^2` (``s/n`` for
    :func:`sparse_signal`), so :math:`\sigma_\xi^2 = \text{signal\_power}/(N\cdot\text{snr})`.
    The stream is independent of the signal and measurement streams.
    """
    N = check_int("N", N, 1)
    seed = check_seed("seed", seed)
    if snr is None:
        return np.zeros(N)
    snr = check_range("snr", snr, 0.0, closed="neither")
    signal_power = check_range("signal_power", signal_power, 0.0, closed="left")
    sigma = math.sqrt(signal_power / (N * snr))
    return sigma * np.random.default_rng([seed, 2]).standard_normal(N)


def least_squares(X: np.ndarray, y: np.ndarray, beta2: float = 0.0) -> np.ndarray:
    r""":math:`\hat b = (\tilde X^\top\tilde X + \beta_2 I_n)^\dagger\tilde X^\top y^*`: the
    minimum-norm least-squares solution for :math:`\beta_2 = 0` (paper §2)."""
    check_finite("X", X)
    check_finite("y", y)
    beta2 = check_range("beta2", beta2, 0.0, closed="left")
    n = X.shape[1]
    return np.linalg.pinv(X.T @ X + beta2 * np.eye(n)) @ X.T @ y


def coherence(A: np.ndarray, B: np.ndarray | None = None) -> float:
    r"""Coherence :math:`\mu(A, B) = \max_{i,j} |\langle a_i, b_j\rangle|/(\|a_i\|\|b_j\|)`
    between the columns of A and B (Definition C.3); with ``B=None`` the mutual coherence
    of A (pairs :math:`i \ne j`)."""
    check_finite("A", A)
    if B is not None:
        check_finite("B", B)
    An = A / np.linalg.norm(A, axis=0, keepdims=True)
    if B is None:
        C = np.abs(An.T @ An)
        np.fill_diagonal(C, 0.0)
    else:
        C = np.abs(An.T @ (B / np.linalg.norm(B, axis=0, keepdims=True)))
    return float(C.max())


@dataclass(frozen=True)
class SparseProblem:
    r"""One sparse-recovery problem :math:`y^* = \tilde X b^* + \xi` (numpy, float64).

    ``X`` is the effective design :math:`\tilde X = X_\text{raw}\Phi` that every kernel
    uses; ``b_hat`` is the least-squares solution for ``beta2 = 0``.
    """

    X: np.ndarray
    y: np.ndarray
    b_star: np.ndarray
    xi: np.ndarray
    phi: np.ndarray
    X_raw: np.ndarray
    tau: float
    seed: int

    @property
    def n(self) -> int:
        return self.X.shape[1]

    @property
    def N(self) -> int:
        return self.X.shape[0]

    @property
    def s(self) -> int:
        return int(np.count_nonzero(self.b_star))

    @property
    def b_hat(self) -> np.ndarray:
        return least_squares(self.X, self.y)

    @property
    def lambda_max(self) -> float:
        r""":math:`\lambda_\max(\tilde X^\top\tilde X)` (the paper's :math:`\sigma_\max`)."""
        return float(np.linalg.norm(self.X, 2) ** 2)

    @property
    def mu(self) -> float:
        r"""Coherence :math:`\mu(X_\text{raw}^\top, \Phi)` between measurements and basis."""
        return coherence(self.X_raw.T, self.phi)

    def tensors(self, device: str | torch.device = "cpu",
                dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(X, y, b_star)`` as torch tensors on ``device`` (as in :func:`grokkit.kernels.resolve_device`)."""
        device = resolve_device(device)
        return tuple(torch.as_tensor(a, dtype=dtype, device=device) for a in (self.X, self.y, self.b_star))


def make_problem(n: int = 100, s: int = 5, N: int = 30, *, tau: float = 0.0, basis: str = "identity",
                 variance: float | str = "1/n", snr: float | None = None, seed: int = 0) -> SparseProblem:
    r"""Draw a sparse-recovery problem (paper §2, Appendix C.5).

    Parameters
    ----------
    n, s, N : signal dimension, sparsity :math:`\|b^*\|_0` (``1 <= s <= n``), measurements.
    tau : coherence parameter in [0, 1]: the first :math:`\lfloor\tau N\rfloor` rows of X are atoms.
    basis : ``"identity"`` (every experiment of the paper), ``"orthonormal"`` or ``"dct"``.
    variance : variance of the Gaussian rows: ``"1/n"`` (paper), ``"1/N"`` (authors' code) or a number.
    snr : :math:`\mathbb E\|b^*\|^2/\mathbb E\|\xi\|^2`; ``None`` is noiseless.
    seed : seeds b* and X (each its own stream, as in the authors' code) and the noise; an
        integer in [0, 2**32 - 1].

    Every argument is checked before anything is drawn (``ValueError`` naming it).
    """
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n, high_name="n")
    N = check_int("N", N, 1)
    seed = check_seed("seed", seed)
    tau = check_range("tau", tau, 0.0, 1.0)
    _variance(variance, n, N)
    check_option("basis", basis, BASES)
    if snr is not None:
        check_range("snr", snr, 0.0, closed="neither")
    phi = dictionary(n, basis, seed)
    b_star = sparse_signal(n, s, seed)
    X_raw = measurement_matrix(N, phi, tau, variance, seed)
    X = X_raw @ phi
    xi = noise(N, snr, s / n, seed)
    return SparseProblem(X=X, y=X @ b_star + xi, b_star=b_star, xi=xi, phi=phi, X_raw=X_raw,
                         tau=tau, seed=seed)
