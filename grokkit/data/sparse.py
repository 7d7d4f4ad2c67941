r"""Sparse-recovery problems (paper §2 and Appendix C.4–C.5, C.12).

The measurements are :math:`y^* = \tilde X b^* + \xi` with :math:`\tilde X = X\Phi`,
:math:`\|b^*\|_0 = s`. Every draw uses its own ``numpy.random.RandomState(seed)`` in
float64 on the CPU, in the order of the authors' generators, so the same seed gives
the same problem on any device (and the values of the authors' generators in ``sparse_recovery/compressed_sensing.py``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, check_seed, show
from grokkit.kernels.run import resolve_device

BASES = ("identity", "orthonormal", "dct", "fourier")


def dictionary(n: int, kind: str = "identity", seed: int = 0) -> np.ndarray:
    r"""Orthonormal dictionary :math:`\Phi \in \mathbb{R}^{n\times n}` (columns are atoms).

    ``"identity"``; ``"orthonormal"``: Q of the QR decomposition of a Gaussian matrix
    (seeded); ``"dct"``: the orthonormal DCT-II atoms
    :math:`\Phi_{jk} = \sqrt{2/n}\,c_k\cos(\pi(2j+1)k/2n)`, :math:`c_0 = 1/\sqrt2`;
    ``"fourier"``: the real orthonormal Fourier atoms in frequency order, column 0 the constant
    :math:`1/\sqrt n`, columns :math:`2k-1` and :math:`2k` the pair
    :math:`\sqrt{2/n}\cos(2\pi kj/n)` and :math:`\sqrt{2/n}\sin(2\pi kj/n)` for
    :math:`1 \le k < n/2`, and for even n the last column :math:`(-1)^j/\sqrt n` (the real
    counterpart of the DFT basis of Figure 38, §C.12.2).
    """
    n = check_int("n", n, 1)
    check_option("basis", kind, BASES)
    seed = check_seed("seed", seed)
    if kind == "identity":
        return np.eye(n)
    if kind == "orthonormal":
        q, r = np.linalg.qr(np.random.RandomState(seed).randn(n, n))
        return q * np.sign(np.diag(r))
    if kind == "fourier":
        j = np.arange(n)[:, None]
        k = np.arange(1, (n + 1) // 2)[None, :]
        phi = np.empty((n, n))
        phi[:, 0] = 1.0 / np.sqrt(n)
        phi[:, 1:2 * k.size + 1:2] = np.sqrt(2.0 / n) * np.cos(2 * np.pi * k * j / n)
        phi[:, 2:2 * k.size + 1:2] = np.sqrt(2.0 / n) * np.sin(2 * np.pi * k * j / n)
        if n % 2 == 0:
            phi[:, -1] = (-1.0) ** np.arange(n) / np.sqrt(n)
        return phi
    j, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    phi = np.sqrt(2.0 / n) * np.cos(np.pi * (2 * j + 1) * k / (2 * n))
    phi[:, 0] /= np.sqrt(2.0)
    return phi


def orthonormal_reduction(phi: np.ndarray, b_star: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""The paper's reduction of a dictionary to an orthonormal basis (§C.3): for
    :math:`\Phi \in \mathbb R^{n\times m}` with m ≤ n linearly independent columns and
    :math:`b^* \in \mathbb R^m`, with :math:`\Phi^\perp` an orthonormal basis of the orthogonal
    complement of its range and :math:`\Psi = [\Phi\ \Phi^\perp]`,

    .. math:: \tilde\Phi = \Psi(\Psi^\top\Psi)^{-1/2}, \qquad
              \tilde b^* = (\Psi^\top\Psi)^{1/2}\begin{bmatrix} b^* \\ 0\end{bmatrix},

    so that :math:`\tilde\Phi` is orthonormal and :math:`\tilde\Phi\tilde b^* = \Phi b^*`. Returns
    :math:`(\tilde\Phi, \tilde b^*)`. (The paper claims :math:`\|\tilde b^*\|_0 = \|b^*\|_0`, which needs
    :math:`\Phi^\top\Phi` diagonal.)"""
    check_finite("phi", phi)
    check_finite("b_star", b_star)
    phi, b_star = np.asarray(phi, dtype=float), np.asarray(b_star, dtype=float)
    if phi.ndim != 2 or phi.shape[1] > phi.shape[0]:
        raise ValueError(f"phi must be an n x m matrix with m <= n, got shape {phi.shape}")
    n, m = phi.shape
    if b_star.shape != (m,):
        raise ValueError(f"b_star must have shape (m,) = ({m},), got {b_star.shape}")
    if np.linalg.matrix_rank(phi) < m:
        raise ValueError(f"phi must have linearly independent columns (rank m = {m}), "
                         f"got rank {np.linalg.matrix_rank(phi)}")
    U = np.linalg.svd(phi)[0]
    psi = np.hstack([phi, U[:, m:]])  # U[:, m:]: an orthonormal basis of range(phi)'s complement
    lam, V = np.linalg.eigh(psi.T @ psi)
    root, inv_root = (V * np.sqrt(lam)) @ V.T, (V / np.sqrt(lam)) @ V.T
    return psi @ inv_root, root @ np.concatenate([b_star, np.zeros(n - m)])


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


def digit_signal() -> np.ndarray:
    r"""The image of Figures 36–37 (§C.12.1) as :math:`b^* \in \mathbb R^{64}`: the first 8×8
    digit of scikit-learn's bundled UCI optical-recognition digits (``load_digits().images[0]``,
    a 0; the paper calls it "MNIST", but MNIST images are 28×28), min–max normalised to [0, 1],
    values below 0.5 set to 0, flattened row by row: s = 22 nonzeros (34.38 %, the paper's
    count), all in [0.5, 1]. Reshape with ``reshape(8, 8)``."""
    from sklearn.datasets import load_digits

    image = load_digits().images[0].astype(float)
    image = (image - image.min()) / (image.max() - image.min())
    image[image < 0.5] = 0.0
    return image.ravel()


def sinusoid_signal(n: int = 100, frequencies=(10, 25, 40, 75, 95), amplitudes=(1.0, 0.8, 1.2, 1.5, 0.5),
                    phases=(0.0, np.pi / 4, 3 * np.pi / 8, 3 * np.pi / 4, np.pi)) -> np.ndarray:
    r"""The sinusoid of Figures 38–40 (§C.12.2) in the real Fourier basis (:func:`dictionary`
    ``"fourier"``): :math:`b^*` with :math:`\Phi b^* = a^*`,

    .. math:: a^*(j) = \sum_{k\in F} A_k\cos(2\pi kj/n + \varphi_k), \qquad j = 0, \dots, n-1.

    Frequency k and n − k are the same real atom (:math:`\cos(2\pi(n-k)j/n + \varphi) =
    \cos(2\pi kj/n - \varphi)`), so k is folded to :math:`k' = \min(k \bmod n, n - k \bmod n)`
    and each term adds :math:`A\cos\varphi'` to the cosine atom of k' and :math:`-A\sin\varphi'` to
    its sine atom (times :math:`\sqrt{n/2}`, or :math:`\sqrt n` for k' = 0 and n/2, which have no
    sine atom), :math:`\varphi' = \pm\varphi`. Coefficients below :math:`10^{-12}` of the largest
    (the sine of :math:`\varphi = \pi`) are set to 0: the paper's F, A, φ give 6 nonzeros (its complex
    DFT has 8, the 4 folded frequencies and their conjugates; the paper says s = 5)."""
    n = check_int("n", n, 2)
    frequencies = [check_int("frequencies", k, 0) for k in np.atleast_1d(frequencies)]
    amplitudes = check_grid("amplitudes", amplitudes).ravel()
    phases = check_grid("phases", phases).ravel()
    if not (len(frequencies) == amplitudes.size == phases.size):
        raise ValueError(f"frequencies, amplitudes and phases must have the same length, got "
                         f"{len(frequencies)}, {amplitudes.size} and {phases.size}")
    b_star = np.zeros(n)
    for k, A, phase in zip(frequencies, amplitudes, phases):
        k = k % n
        if 2 * k > n:
            k, phase = n - k, -phase
        if k == 0 or 2 * k == n:
            b_star[0 if k == 0 else n - 1] += np.sqrt(n) * A * np.cos(phase)
        else:
            b_star[2 * k - 1] += np.sqrt(n / 2) * A * np.cos(phase)
            b_star[2 * k] -= np.sqrt(n / 2) * A * np.sin(phase)
    b_star[np.abs(b_star) < 1e-12 * np.abs(b_star).max(initial=0.0)] = 0.0
    if not b_star.any():
        raise ValueError(f"amplitudes must give a nonzero signal, got {show(amplitudes.tolist())}")
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


def binary_fractions(shape, alpha: float = 2.0**-10, max_ratio: int = 64, integer_share: float = 0.0,
                     bits: int = 10, seed: int = 0) -> np.ndarray:
    r"""Starting points :math:`b^{(1)}` for the exact ℓ₁ dynamics of Lemma C.11 and Theorem C.12
    (:func:`grokkit.theory.sparse.l1_iterates`): :math:`b = m\,\alpha\,2^{-\text{bits}}` with m uniform integers in
    :math:`[-\text{max\_ratio}\,2^{\text{bits}}, \text{max\_ratio}\,2^{\text{bits}}]` (so :math:`|b|/\alpha \le` ``max_ratio``),
    a share ``integer_share`` of them (each independently) rounded to an integer multiple of α.
    ``alpha`` must be a power of two, so that every b and every :math:`b - k\alpha` is exact in float64.
    Drawn from ``RandomState(seed)``; shape ``shape`` (an int or a tuple of ints >= 1)."""
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    shape = tuple(check_int("shape", k, 1) for k in shape)
    alpha = check_range("alpha", alpha, 0.0, closed="neither")
    if math.frexp(alpha)[0] != 0.5:
        raise ValueError(f"alpha must be a power of two, got {show(alpha)}")
    max_ratio = check_int("max_ratio", max_ratio, 1, 2**20)
    integer_share = check_range("integer_share", integer_share, 0.0, 1.0)
    bits = check_int("bits", bits, 0, 30)
    rs = np.random.RandomState(check_seed("seed", seed))
    m = rs.randint(-max_ratio * 2**bits, max_ratio * 2**bits + 1, size=shape)
    integer = rs.rand(*shape) < integer_share
    m[integer] = 2**bits * np.round(m[integer] / 2**bits).astype(m.dtype)
    return m * (alpha * 2.0**-bits)


def coherence(A: np.ndarray, B: np.ndarray | None = None) -> float:
    r"""Coherence :math:`\mu(A, B) = \max_{i,j} |\langle a_i, b_j\rangle|/(\|a_i\|\|b_j\|)`
    between the columns of A and B (Definition C.3); with ``B=None`` the mutual coherence
    of A (pairs :math:`i \ne j`)."""
    check_finite("A", A)
    if B is not None:
        check_finite("B", B)
    An = A / np.linalg.norm(A, axis=0, keepdims=True)
    if B is None:
        C = np.abs(An.conj().T @ An)
        np.fill_diagonal(C, 0.0)
    else:
        C = np.abs(An.conj().T @ (B / np.linalg.norm(B, axis=0, keepdims=True)))
    return float(C.max())


def measurement_coherences(n: int, N_grid, tau_grid, trials: int, *, basis: str = "orthonormal",
                           variance: float | str = "1/N", seed: int = 0) -> np.ndarray:
    r"""Monte-Carlo sample of the coherence :math:`\mu(X^\top, \Phi)` between the measurements (rows
    of X) and the atoms (Definition C.3) against N and τ (Figure 6a): an array (T, K, ``trials``)
    for the T values of ``tau_grid`` and the K of ``N_grid``.

    :math:`\Phi` = :func:`dictionary` (n, ``basis``, ``seed``) is drawn once (the authors' code: a
    random orthonormal basis); each X is :func:`measurement_matrix` (N, Φ, τ, ``variance``) with its
    own seed, from ``seed``, the trial and the values of N and τ."""
    n = check_int("n", n, 1)
    N_grid = [check_int("N_grid", N, 1) for N in np.atleast_1d(N_grid)]
    tau_grid = [check_range("tau_grid", t, 0.0, 1.0) for t in np.atleast_1d(tau_grid)]
    if not N_grid or not tau_grid:
        raise ValueError(f"N_grid and tau_grid must be non-empty, got {show(N_grid)} and {show(tau_grid)}")
    trials = check_int("trials", trials, 1)
    check_option("basis", basis, BASES)
    _variance(variance, n, 1)
    seed = check_seed("seed", seed)
    phi = dictionary(n, basis, seed)
    out = np.empty((len(tau_grid), len(N_grid), trials))
    for i, tau in enumerate(tau_grid):
        for j, N in enumerate(N_grid):
            for k in range(trials):
                key = np.random.SeedSequence([seed, k, N, round(tau * 10**6)]).generate_state(1)[0]
                out[i, j, k] = coherence(measurement_matrix(N, phi, tau, variance, int(key)).T, phi)
    return out


def one_coherence(A: np.ndarray, s: int) -> float:
    r"""The 1-coherence (Definition C.3)

    .. math:: \mu_1(A, s) = \max_i\max_{J\subseteq[n]\setminus\{i\},\,|J|\le s}\sum_{j\in J}
              \frac{|\langle a_i, a_j\rangle|}{\|a_i\|\|a_j\|},

    the largest sum of the ``s`` largest normalised off-diagonal entries of a row of
    :math:`|A^\top A|`: at most :math:`s\mu(A)` (:func:`coherence`). ``s`` in [1, n − 1]."""
    check_finite("A", A)
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[1] < 2:
        raise ValueError(f"A must be a matrix with at least 2 columns, got shape {A.shape}")
    s = check_int("s", s, 1, A.shape[1] - 1, high_name="n - 1")
    An = A / np.linalg.norm(A, axis=0, keepdims=True)
    C = np.abs(An.conj().T @ An)
    np.fill_diagonal(C, 0.0)
    return float(np.sort(C, axis=1)[:, -s:].sum(axis=1).max())


class Design:
    """The sizes of a problem whose design ``X`` is (N, n): ``n`` the dimension, ``N`` the samples."""

    X: np.ndarray

    @property
    def n(self) -> int:
        return self.X.shape[1]

    @property
    def N(self) -> int:
        return self.X.shape[0]


@dataclass(frozen=True)
class Problem(Design):
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


def problem(n: int = 100, s: int = 5, N: int = 30, *, tau: float = 0.0, basis: str = "identity",
                 variance: float | str = "1/n", snr: float | None = None, seed: int = 0,
                 x_seed: int | None = None) -> Problem:
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
    x_seed : seeds X and the noise in place of ``seed`` (the authors' N sweeps keep one b*, seed 1,
        and draw X with seed 1 + i for the i-th N, Figures 8–10 and 27–29); None uses ``seed``.

    Every argument is checked before anything is drawn (``ValueError`` naming it).
    """
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n, high_name="n")
    N = check_int("N", N, 1)
    seed = check_seed("seed", seed)
    x_seed = seed if x_seed is None else check_seed("x_seed", x_seed)
    tau = check_range("tau", tau, 0.0, 1.0)
    _variance(variance, n, N)
    check_option("basis", basis, BASES)
    if snr is not None:
        check_range("snr", snr, 0.0, closed="neither")
    phi = dictionary(n, basis, seed)
    return _measure(phi, sparse_signal(n, s, seed), N, tau, variance, snr, s / n, seed, x_seed)


def _measure(phi, b_star, N, tau, variance, snr, signal_power, seed, x_seed) -> Problem:
    X_raw = measurement_matrix(N, phi, tau, variance, x_seed)
    X = X_raw @ phi
    xi = noise(N, snr, signal_power, x_seed)
    return Problem(X=X, y=X @ b_star + xi, b_star=b_star, xi=xi, phi=phi, X_raw=X_raw,
                         tau=tau, seed=seed)


def signal_problem(b_star: np.ndarray, N: int, *, basis: str = "identity", tau: float = 0.0,
                   variance: float | str = "1/N", snr: float | None = None, seed: int = 0) -> Problem:
    r"""A sparse-recovery problem for a given signal (Figures 36–40, §C.12): :math:`b^*` the
    coefficients of :math:`a^* = \Phi b^*` in the :func:`dictionary` ``basis``, measured as in
    :func:`problem` (X by :func:`measurement_matrix` with ``tau``, ``variance`` and ``seed``,
    :math:`\tilde X = X\Phi`, noise by :func:`noise` with signal power :math:`\|b^*\|_2^2`).
    ``b_star`` is finite, nonzero, of length n = the basis size."""
    check_finite("b_star", b_star)
    b_star = np.asarray(b_star, dtype=float)
    if b_star.ndim != 1 or not b_star.any():
        raise ValueError(f"b_star must be a nonzero vector of shape (n,), got shape {b_star.shape}")
    N = check_int("N", N, 1)
    seed = check_seed("seed", seed)
    tau = check_range("tau", tau, 0.0, 1.0)
    _variance(variance, b_star.size, N)
    check_option("basis", basis, BASES)
    if snr is not None:
        check_range("snr", snr, 0.0, closed="neither")
    phi = dictionary(b_star.size, basis, seed)
    return _measure(phi, b_star.copy(), N, tau, variance, snr, float(b_star @ b_star), seed, seed)


def polynomial_features(x: np.ndarray) -> np.ndarray:
    r"""The features of a quadratic polynomial (§C.12.3): for each row x of ``x`` (N, m),
    :math:`q(x) = [x_ix_j]_{i\le j} \oplus [x_i]` (the products in row-major order of the upper
    triangle, then x), of length n = m(m + 1)/2 + m, so that
    :math:`p(x) = \sum_{i\le j}M_{ij}x_ix_j + \sum_i m_ix_i = q(x)^\top a`."""
    check_finite("x", x)
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"x must be a matrix (N, m) with m >= 1, got shape {x.shape}")
    i, j = np.triu_indices(x.shape[1])
    return np.hstack([x[:, i] * x[:, j], x])


def polynomial_problem(m: int = 10, s: int = 5, N: int = 40, *, seed: int = 0) -> Problem:
    r"""Recovering a sparse quadratic polynomial from its values (Figure 41, §C.12.3): the
    coefficient vector :math:`a^* \in \mathbb R^n`, n = m(m + 1)/2 + m, is :func:`sparse_signal`
    (n, ``s``, ``seed``) (s entries :math:`\mathcal N(0, 1/n)`); the N inputs :math:`x_k` are
    i.i.d. :math:`\mathcal N(0, I_m)`; the design is :math:`\tilde X = Q/\sqrt N` with rows
    :math:`q(x_k)` (:func:`polynomial_features`) and :math:`y_k = p^*(x_k)/\sqrt N`, so that the
    data term is the mean squared error (the scale of the Gaussian recipe's variance 1/N).
    Noiseless, :math:`\Phi = I_n`. The paper fixes none of m, s, N or the law of x: our choices."""
    m = check_int("m", m, 1)
    n = m * (m + 1) // 2 + m
    s = check_int("s", s, 1, n, high_name="m(m + 1)/2 + m")
    N = check_int("N", N, 1)
    seed = check_seed("seed", seed)
    b_star = sparse_signal(n, s, seed)
    x = np.random.default_rng([seed, 3]).standard_normal((N, m))
    X = polynomial_features(x) / np.sqrt(N)
    return Problem(X=X, y=X @ b_star, b_star=b_star, xi=np.zeros(N), phi=np.eye(n), X_raw=X,
                         tau=0.0, seed=seed)


def stack_problems(problems) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Problems of different sizes N as one batch for the kernels: ``(X, y, b_star)`` of shapes
    (G, N_max, n), (G, N_max) and (G, n), configuration g holding ``problems[g]`` with zero rows
    appended to :math:`\tilde X` and zeros to :math:`y^*` (the N sweeps of Figures 8–10, 13–24 and
    27–29 in one run).

    A zero row with a zero measurement changes nothing: it adds nothing to
    :math:`\tilde X^\top(\tilde Xb - y^*)`, to :math:`\lambda_\max`, to the residual's norm or to
    :math:`\|y^*\|`, and the projection of the projected method (:math:`\tilde X^\dagger`) gets
    zero columns for it; so each configuration follows its own problem's iterates.
    """
    problems = list(problems)
    if not problems:
        raise ValueError("problems must hold at least one grokkit.data.sparse.Problem, got an empty sequence")
    bad = [type(p).__name__ for p in problems if not isinstance(p, Problem)]
    if bad:
        raise ValueError(f"problems must be grokkit.data.sparse.Problem instances (from grokkit.data.sparse.problem), "
                         f"got {bad[0]}")
    sizes = {p.n for p in problems}
    if len(sizes) > 1:
        raise ValueError(f"problems must share the dimension n (the columns of X), got n in {sorted(sizes)}")
    N_max = max(p.N for p in problems)
    X = np.zeros((len(problems), N_max, problems[0].n))
    y = np.zeros((len(problems), N_max))
    for g, p in enumerate(problems):
        X[g, :p.N], y[g, :p.N] = p.X, p.y
    return X, y, np.stack([p.b_star for p in problems])


def sn_problems(n: int, s, N, *, variance: float | str = "1/N", snr: float | None = None, seed: int = 1,
                x_seed: int = 1) -> tuple[list[Problem], dict[str, np.ndarray]]:
    r"""The problems of the study over the sparsity s and the number of measurements N (Appendix
    C.6.4, C.7 and C.8: Figures 13–24), with their labels.

    One :func:`problem` per pair, s slowest: ``problem(n, s_i, N_j, seed=seed,
    x_seed=x_seed)``, so each s has one :math:`b^*` (drawn with ``seed``) for every N, and every
    N draws X from the same stream (``x_seed``; the authors' seed 1 for every N): the rows of a
    smaller N are the first rows of a larger one, up to the variance's scale. Returns
    ``(problems, labels)``, ``labels = {"s": (G,), "N": (G,)}`` integer arrays in the order of the
    problems, G = len(s)·len(N); :func:`stack_problems` makes them one batch for the kernels.

    ``s`` and ``N`` are grids (a number or a list) of distinct integers, s in [1, n], N >= 1;
    ``variance``, ``snr``, ``seed`` and ``x_seed`` as in :func:`problem`; all checked first."""
    n = check_int("n", n, 1)
    grids = {}
    for name, values, high in (("s", s, n), ("N", N, math.inf)):
        values = [check_int(name, v, 1, high, high_name="n" if high == n else "")
                  for v in np.atleast_1d(np.asarray(values, dtype=object))]
        if len(set(values)) != len(values):
            raise ValueError(f"{name} must be a grid of distinct integers, got {show(values)}")
        grids[name] = values
    seed, x_seed = check_seed("seed", seed), check_seed("x_seed", x_seed)
    for m in grids["N"]:  # every remaining argument, before anything is drawn
        _variance(variance, n, m)
    if snr is not None:
        check_range("snr", snr, 0.0, closed="neither")
    pairs = [(a, m) for a in grids["s"] for m in grids["N"]]
    problems = [problem(n, a, m, variance=variance, snr=snr, seed=seed, x_seed=x_seed) for a, m in pairs]
    return problems, {"s": np.array([a for a, _ in pairs]), "N": np.array([m for _, m in pairs])}


