r"""Sparse-recovery problems (paper §2 and Appendix C.4–C.5) and matrix-factorization
problems (paper §2, Appendix D: completion and sensing, a section further down), and the data of
the neural-network experiments (paper §3, Appendix E: teacher–student, modular addition, MNIST, in
the last section).

The measurements are :math:`y^* = \tilde X b^* + \xi` with :math:`\tilde X = X\Phi`,
:math:`\|b^*\|_0 = s`. Every draw uses its own ``numpy.random.RandomState(seed)`` in
float64 on the CPU, in the order of the authors' generators, so the same seed gives
the same problem on any device (and the authors' regression values, spec §3.7).
"""
from __future__ import annotations

import dataclasses
import gzip
import math
import os
from dataclasses import dataclass
from pathlib import Path

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


def flat_sparse_signal(n: int, s: int, seed: int = 0) -> np.ndarray:
    r"""The planted predictor of Woodworth et al. §4: :math:`\beta^*` with ``s`` entries equal to
    :math:`1/\sqrt s` at random positions (so :math:`\|\beta^*\|_2 = 1`). Measure it with
    :func:`signal_problem` (their :math:`x_n \sim \mathcal N(0, I)` is ``variance=1.0``; their noise
    variance 0.01 is ``snr = 100/N``, since the signal power is 1)."""
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n, high_name="n")
    rs = np.random.RandomState(check_seed("seed", seed))
    b_star = np.zeros(n)
    b_star[rs.choice(n, s, replace=False)] = 1 / np.sqrt(s)
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
    (:func:`grokkit.theory.l1_iterates`): :math:`b = m\,\alpha\,2^{-\text{bits}}` with m uniform integers in
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
                 variance: float | str = "1/n", snr: float | None = None, seed: int = 0,
                 x_seed: int | None = None) -> SparseProblem:
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


def _measure(phi, b_star, N, tau, variance, snr, signal_power, seed, x_seed) -> SparseProblem:
    X_raw = measurement_matrix(N, phi, tau, variance, x_seed)
    X = X_raw @ phi
    xi = noise(N, snr, signal_power, x_seed)
    return SparseProblem(X=X, y=X @ b_star + xi, b_star=b_star, xi=xi, phi=phi, X_raw=X_raw,
                         tau=tau, seed=seed)


def signal_problem(b_star: np.ndarray, N: int, *, basis: str = "identity", tau: float = 0.0,
                   variance: float | str = "1/N", snr: float | None = None, seed: int = 0) -> SparseProblem:
    r"""A sparse-recovery problem for a given signal (Figures 36–40, §C.12): :math:`b^*` the
    coefficients of :math:`a^* = \Phi b^*` in the :func:`dictionary` ``basis``, measured as in
    :func:`make_problem` (X by :func:`measurement_matrix` with ``tau``, ``variance`` and ``seed``,
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


def polynomial_problem(m: int = 10, s: int = 5, N: int = 40, *, seed: int = 0) -> SparseProblem:
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
    return SparseProblem(X=X, y=X @ b_star, b_star=b_star, xi=np.zeros(N), phi=np.eye(n), X_raw=X,
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
        raise ValueError("problems must hold at least one SparseProblem, got an empty sequence")
    bad = [type(p).__name__ for p in problems if not isinstance(p, SparseProblem)]
    if bad:
        raise ValueError(f"problems must be SparseProblem instances (grokkit.data.make_problem), got {bad[0]}")
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
                x_seed: int = 1) -> tuple[list[SparseProblem], dict[str, np.ndarray]]:
    r"""The problems of the study over the sparsity s and the number of measurements N (Appendix
    C.6.4, C.7 and C.8: Figures 13–24), with their labels.

    One :func:`make_problem` per pair, s slowest: ``make_problem(n, s_i, N_j, seed=seed,
    x_seed=x_seed)``, so each s has one :math:`b^*` (drawn with ``seed``) for every N, and every
    N draws X from the same stream (``x_seed``; the authors' seed 1 for every N): the rows of a
    smaller N are the first rows of a larger one, up to the variance's scale. Returns
    ``(problems, labels)``, ``labels = {"s": (G,), "N": (G,)}`` integer arrays in the order of the
    problems, G = len(s)·len(N); :func:`stack_problems` makes them one batch for the kernels.

    ``s`` and ``N`` are grids (a number or a list) of distinct integers, s in [1, n], N >= 1;
    ``variance``, ``snr``, ``seed`` and ``x_seed`` as in :func:`make_problem`; all checked first."""
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
    problems = [make_problem(n, a, m, variance=variance, snr=snr, seed=seed, x_seed=x_seed) for a, m in pairs]
    return problems, {"s": np.array([a for a, _ in pairs]), "N": np.array([m for _, m in pairs])}


# ---------------------------------------------------------------------------------------
# background: Lyu et al. (2024), linear classification with a diagonal network
# ---------------------------------------------------------------------------------------
#
# The two data sets of Lyu et al.'s Figure 1 (§3.2.3): sparse classification on the hypercube
# (grokking, Figure 1a) and a Gaussian with a margin along a dense direction (misgrokking,
# Figure 1b). Their d, n, k are grokkit's n (dimension), N (training points) and s (sparsity).
# Labels are ±1 floats, inputs float64 (N, n); one ``RandomState(seed)`` draws everything.


@dataclass(frozen=True)
class ClassificationProblem:
    r"""A binary linear classification task :math:`y = \operatorname{sign}\langle w^*, x\rangle`
    (numpy, float64): training inputs ``X`` (N, n) and labels ``y`` (N,) in {−1, +1}, a test set
    ``X_test``, ``y_test`` drawn the same way, the ground truth ``w_star`` (n,), the ``seed`` and a
    one-sentence ``note`` on where the data came from."""

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    w_star: np.ndarray
    seed: int
    note: str = ""

    @property
    def n(self) -> int:
        return self.X.shape[1]

    @property
    def N(self) -> int:
        return self.X.shape[0]


def _labels(scores: np.ndarray) -> np.ndarray:
    """±1 labels of ``scores``: +1 where positive, −1 elsewhere (the authors' ``(s > 0) * 2 - 1``)."""
    return np.where(scores > 0, 1.0, -1.0)


def sparse_classification(n: int = 1000, s: int = 3, N: int = 100, *, n_test: int = 1000,
                          seed: int = 0) -> ClassificationProblem:
    r"""Lyu et al.'s sparse linear classification (§3.2.3, Figure 1a; Appendix E.2).

    Inputs :math:`x \sim \mathrm{Unif}\{\pm1\}^n`; the ground truth :math:`w^*` has its first
    ``s`` coordinates drawn from :math:`\mathrm{Unif}\{\pm1\}^s` and the others 0; labels
    :math:`y = \operatorname{sign}\langle w^*, x\rangle`. For odd ``s`` (Appendix E.2's assumption)
    no score is 0; for even ``s`` a score of 0 gets the label −1, as in the authors' code.
    :math:`w^*` has :math:`\ell_2` margin :math:`1/\sqrt s` and :math:`\ell_1` margin
    :math:`1/s` on every point (the proofs of Theorems E.4 and E.5).

    One ``RandomState(seed)`` draws the signs of :math:`w^*`, the ``N`` training inputs, then the
    ``n_test`` test inputs (so ``n_test`` leaves the training set unchanged). Every argument is
    checked before anything is drawn.
    """
    n = check_int("n", n, 1)
    s = check_int("s", s, 1, n, high_name="n")
    N = check_int("N", N, 1)
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    rs = np.random.RandomState(seed)
    w_star = np.zeros(n)
    w_star[:s] = rs.randint(0, 2, s) * 2.0 - 1.0
    X = rs.randint(0, 2, (N, n)) * 2.0 - 1.0
    X_test = rs.randint(0, 2, (n_test, n)) * 2.0 - 1.0
    return ClassificationProblem(
        X=X, y=_labels(X @ w_star), X_test=X_test, y_test=_labels(X_test @ w_star), w_star=w_star,
        seed=seed, note=f"x uniform on the hypercube {{-1, +1}}^{n}, labels sign<w*, x> with w* the first "
                        f"{s} coordinates random signs; {N} training and {n_test} test points, seed {seed}.")


def margin_classification(n: int = 10_000, N: int = 32, gamma: float = 25.0, *, n_test: int = 1000,
                          seed: int = 0) -> ClassificationProblem:
    r"""Lyu et al.'s misgrokking data (§3.2.3, Figure 1b): a Gaussian split by a margin γ.

    :math:`w^*` is a uniformly random unit vector (a normalised Gaussian); each point is
    :math:`z \sim \mathcal N(0, I_n)`, :math:`y = \operatorname{sign}\langle z, w^*\rangle` and
    :math:`x = z + y\frac{\gamma}{2}w^*`, so :math:`y\langle w^*, x\rangle \ge \gamma/2`: the
    classes are separated by an :math:`\ell_2` margin of at least γ/2 along a dense direction,
    while :math:`w^*/\|w^*\|_1` has an :math:`\ell_1` margin of only about
    :math:`\frac{\gamma}{2}\sqrt{\pi/(2n)}`. The population accuracy of any linear classifier
    has a closed form (:func:`grokkit.theory.margin_classification_accuracy`).

    One ``RandomState(seed)`` draws :math:`w^*`, the ``N`` training points, then the ``n_test``
    test points (the authors' order; ``n_test`` leaves the training set unchanged). Every argument
    is checked before anything is drawn.
    """
    n = check_int("n", n, 1)
    N = check_int("N", N, 1)
    gamma = check_range("gamma", gamma, 0.0, closed="left")
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    rs = np.random.RandomState(seed)
    w_star = rs.standard_normal(n)
    w_star /= np.linalg.norm(w_star)
    Z = rs.standard_normal((N, n))
    Z_test = rs.standard_normal((n_test, n))
    y, y_test = _labels(Z @ w_star), _labels(Z_test @ w_star)
    return ClassificationProblem(
        X=Z + (gamma / 2) * y[:, None] * w_star, y=y, X_test=Z_test + (gamma / 2) * y_test[:, None] * w_star,
        y_test=y_test, w_star=w_star, seed=seed,
        note=f"z ~ N(0, I_{n}), y = sign<z, w*> for a random unit w*, x = z + y (gamma/2) w* with gamma = "
             f"{gamma:g}; {N} training and {n_test} test points, seed {seed}.")


# ---------------------------------------------------------------------------------------
# Matrix factorization (paper §2, Appendix D)
# ---------------------------------------------------------------------------------------
#
# Conventions (spec §0): :math:`n = n_1 n_2`; :math:`\operatorname{vec}` is column-major,
# :math:`\operatorname{vec}(A)_{j n_1 + i} = A_{ij}` (``A.reshape(-1, order="F")``), as in the
# paper's Lemma D.14 and the authors' ``np_vec``. Both problems read
# :math:`y_s = X^{(1)\top}_s A^* X^{(2)}_s = (X^{(2)}\bullet X^{(1)})_s\operatorname{vec}A^*`;
# completion keeps only the mask (never the N × n matrix X).

GENERATORS = ("authors", "orthogonal", "power_law", "spiky", "gaussian")
MATRIX_KINDS = ("completion", "sensing")
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
    prints the indices :math:`jm + i` and :math:`inp + jm + k`: typos, spec §5 item 22.)"""
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
    r"""Ground truth :math:`A^* \in \mathbb{R}^{n_1\times n_2}` of rank ``r`` (spec §3.1), float64.

    ``"authors"`` (the official ``get_matrices``): :math:`U_0 \in \mathbb{R}^{n_1\times r}` then
    :math:`V_0 \in \mathbb{R}^{n_2\times r}` i.i.d. :math:`\mathcal N(0, 1)` from
    ``RandomState(seed)``, :math:`W = U_0V_0^\top/\sqrt r` and
    :math:`A^* = W\sqrt{n_1n_2}/\|W\|_F`, so :math:`\|A^*\|_F = \sqrt{n_1 n_2}` and the singular
    values are random. (The authors draw in float32 from torch's RNG, and their ``seed=0`` is
    unseeded — spec §5 item 30 — so their matrices cannot be reproduced bit for bit.)
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
    check_finite("A", A)
    A = np.asarray(A, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"A must be a matrix (2-d array), got shape {A.shape}")
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
    check_finite("A_star", A_star)
    A_star = np.asarray(A_star, dtype=float)
    if A_star.ndim != 2:
        raise ValueError(f"A_star must be a matrix (2-d array), got shape {A_star.shape}")
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
    check_finite("A_star", A_star)
    A_star = np.asarray(A_star, dtype=float)
    if A_star.ndim != 2:
        raise ValueError(f"A_star must be a matrix (2-d array), got shape {A_star.shape}")
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
    check_finite("A", A)
    A = np.asarray(A, dtype=float)
    if A.ndim != 2:
        raise ValueError(f"A must be a matrix (2-d array), got shape {A.shape}")
    return A[_check_mask(mask, *A.shape)]


def completion_masks(A_star: np.ndarray, N: int, tau, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    r"""The masks and observed entries of a τ sweep (Appendix D.4, D.10), stacked for one batched
    kernel call: ``masks`` (G, n1, n2) with ``masks[g] = completion_mask(A_star, N, tau[g], seed)``
    and ``y`` (G, N) with ``y[g] = A_star[masks[g]]`` (row-major order of each mask).

    ``tau`` is a number or a grid of G values in [0, 1]; every mask observes the same N
    entries of the same :math:`A^*` (the operator :class:`grokkit.kernels.matrix.Measurements`
    accepts per-configuration masks of equal N), so the sweep is one call of
    :func:`grokkit.kernels.matrix.subgradient` with ``A_star`` shared."""
    check_finite("A_star", A_star)
    A_star = np.asarray(A_star, dtype=float)
    if A_star.ndim != 2:
        raise ValueError(f"A_star must be a matrix (2-d array), got shape {A_star.shape}")
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
    (paper's rule; the authors' code picks random columns, spec §3.3). The variance v is
    ``"1/n_k"`` (:math:`1/n_1` for :math:`X^{(1)}`, :math:`1/n_2` for :math:`X^{(2)}`: the
    authors' default), ``"1/n_k^2"`` (the paper's literal "σ = 1/n₁"), ``"1/N"`` (the
    authors' notebook) or a number. One ``RandomState(seed)`` draws :math:`X^{(1)}` then
    :math:`X^{(2)}` (the authors re-seed both, which correlates them when :math:`n_1 = n_2`).
    The measurement matrix is :math:`X = X^{(2)}\bullet X^{(1)}` (:func:`face_splitting`).
    """
    check_finite("A_star", A_star)
    A_star = np.asarray(A_star, dtype=float)
    if A_star.ndim != 2:
        raise ValueError(f"A_star must be a matrix (2-d array), got shape {A_star.shape}")
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
class MatrixProblem:
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


def make_matrix_problem(n1: int = 10, n2: int = 10, r: int = 2, N: int = 80, *, kind: str = "completion",
                        tau: float = 0.0, generator: str = "authors", variance: float | str = "1/n_k",
                        snr: float | None = None, seed: int = 0) -> MatrixProblem:
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
    snr : :math:`\|A^*\|_F^2/\mathbb E\|\xi\|^2` (:func:`noise` with signal power
        :math:`\|A^*\|_F^2`); ``None`` is noiseless (every figure of the paper).
    seed : one integer in [0, 2**32 - 1] seeds :math:`A^*`, the measurements and the noise,
        each with its own generator, so the same seed gives the same problem everywhere.

    Every argument is checked before anything is drawn (``ValueError`` naming it).
    """
    n1, n2, r = _check_shape(n1, n2, r)
    kind = check_option("kind", kind, MATRIX_KINDS)
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
    return MatrixProblem(kind=kind, A_star=A_star, y_star=y_star, y=y_star + xi, xi=xi, mask=mask, X=X,
                         X1=X1, X2=X2, tau=tau, generator=generator, seed=seed)


# ---------------------------------------------------------------------------------------
# Background: Woodworth et al. (2020) and Lyu et al. (2024), the papers [G] builds on
# ---------------------------------------------------------------------------------------
#
# Woodworth et al.'s rank-1 Gaussian target is ``low_rank_matrix(d, d, 1, generator="gaussian")``;
# the masks are :func:`completion_mask`'s.


def diagonal_measurements(X: np.ndarray) -> np.ndarray:
    r"""The sensing matrix (N, d²) of diagonal measurements :math:`X_n = \operatorname{diag}(x_n)`
    (Woodworth et al. §6, Theorem 4): :math:`\langle X_n, W\rangle = \sum_i x_{ni}W_{ii}`, on the
    column-major :math:`\operatorname{vec}W` (entry :math:`W_{ii}` at i(d + 1)), for a design X (N, d)
    whose rows are the :math:`x_n`. A matrix model trained on it sees only its diagonal, a
    d-dimensional regression on X."""
    check_finite("X", X)
    X = np.asarray(X, dtype=float)
    if X.ndim != 2:
        raise ValueError(f"X must be a matrix (N, d), got shape {X.shape}")
    N, d = X.shape
    out = np.zeros((N, d * d))
    out[:, np.arange(d) * (d + 1)] = X
    return out


def multiplication_table(d: int) -> np.ndarray:
    r"""Lyu et al.'s multiplication table (§3.3.3, Figure 3): :math:`X^*_{ij} = ij/d^2` for
    i, j = 0, …, d − 1, that is :math:`X^* = uu^\top` with :math:`u = (0, 1/d, \dots, (d-1)/d)`,
    a symmetric matrix of rank 1, float64 (d, d); d ≥ 2 (d = 1 is the zero matrix)."""
    d = check_int("d", d, 2)
    u = np.arange(d) / d
    return np.outer(u, u)


# ---------------------------------------------------------------------------------------
# Neural-network tasks (Section 3, Appendix E)
# ---------------------------------------------------------------------------------------
#
# The data of the teacher–student (E.1, E.2), modular-addition (E.3) and MNIST (E.4)
# experiments, as torch tensors on the CPU: inputs float32, regression targets float32 (N, c),
# class labels int64 (N,). Every draw uses its own ``numpy.random.RandomState(seed)``, never the
# global state (the authors' notebooks draw the teacher and the inputs unseeded, spec §5 item 37).

NET_KINDS = ("regression", "classification")
ENCODINGS = ("one_hot", "sequence")
MNIST_ENV = "GROKKIT_MNIST"
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


@dataclass(frozen=True, eq=False)
class NetTask:
    r"""One supervised task of the paper's Section 3 (torch tensors, on the CPU when made).

    ``kind`` is ``"regression"`` (targets float32 (N, c)) or ``"classification"`` (labels int64
    (N,) in ``[0, n_classes)``). ``J_train`` and ``J_test`` are the teacher's Jacobians
    :math:`\partial y^*/\partial x` (N, c, d), float32, for Sobolev training (E.2), else ``None``.
    ``note`` says in one sentence where the data came from.
    """

    name: str
    kind: str
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    n_classes: int | None = None
    J_train: torch.Tensor | None = None
    J_test: torch.Tensor | None = None
    note: str = ""

    def __post_init__(self):
        check_option("kind", self.kind, NET_KINDS)

    def to(self, device: str | torch.device) -> NetTask:
        """A copy with every tensor on ``device`` (as in :func:`grokkit.kernels.resolve_device`)."""
        device = resolve_device(device)
        moved = {f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor)}
        return dataclasses.replace(self, **moved)


def _net_matrix(name: str, a, columns: int | None = None, columns_name: str = ""):
    """``a`` (numpy or torch) checked as a finite 2-D array with ``columns`` columns."""
    if not isinstance(a, torch.Tensor):
        try:
            a = np.asarray(a, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a 2-D array of numbers, got {show(a)}") from None
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {tuple(a.shape)}")
    if columns is not None and a.shape[1] != columns:
        raise ValueError(f"{name} must have {columns_name} = {columns} columns, got shape {tuple(a.shape)}")
    check_finite(name, a)
    return a


def teacher_jacobian(A, B, X):
    r"""Jacobians of the teacher :math:`y^*(x) = B^*\,\mathrm{ReLU}(A^* x)` at the rows of ``X``
    (Appendix E.2): :math:`J_i = B^*\operatorname{diag}(\mathbb 1[A^* x_i > 0])\,A^*`.

    ``A`` (width, d), ``B`` (c, width), ``X`` (N, d), finite, all numpy or all torch; returns
    (N, c, d) of the same kind (torch: the promoted dtype of the three). The ReLU's derivative is
    taken as 0 at 0, as ``derivatives_2layers_nn`` of the authors' Sobolev notebook.
    """
    as_torch = any(isinstance(a, torch.Tensor) for a in (A, B, X))
    if as_torch and not all(isinstance(a, torch.Tensor) for a in (A, B, X)):
        raise ValueError("A, B and X must be all numpy arrays or all torch tensors, got "
                         + ", ".join(type(a).__name__ for a in (A, B, X)))
    A = _net_matrix("A", A)
    B = _net_matrix("B", B, A.shape[0], "width = A.shape[0]")
    X = _net_matrix("X", X, A.shape[1], "d = A.shape[1]")
    if as_torch:
        dtype = torch.promote_types(torch.promote_types(A.dtype, B.dtype), X.dtype)
        A, B, X = (a.to(dtype) for a in (A, B, X))
        active = (X @ A.T > 0).to(dtype)                        # (N, width)
    else:
        active = (X @ A.T > 0).astype(float)
    return (B[None, :, :] * active[:, None, :]) @ A             # (N, c, width) @ (width, d)


def teacher_student(d: int = 100, width: int = 500, c: int = 2, n_train: int = 100, n_test: int = 1000,
                    *, seed: int = 0) -> NetTask:
    r"""The teacher–student regression task of Appendix E.1–E.2 (Figures 3, 47–50).

    Teacher :math:`y^*(x) = B^*\,\mathrm{ReLU}(A^* x)`, :math:`\mathbb R^d\to\mathbb R^c`, no
    biases, with :math:`A^*\in\mathbb R^{\text{width}\times d}`, :math:`A^*_{ij}\sim\mathcal N(0,1)`
    and :math:`B^*\in\mathbb R^{c\times\text{width}}`, :math:`\text{width}\cdot B^*_{ij}\sim\mathcal N(0,1)`
    (spec §3.10.1); inputs :math:`x\sim\mathcal N(0, I_d)`. The task carries the outputs and the
    teacher's Jacobians (:func:`teacher_jacobian`, for Sobolev training), not the teacher.

    One ``RandomState(seed)`` draws, in this order, :math:`A^*`, :math:`B^*`, the ``n_train``
    training inputs and the ``n_test`` test inputs (float64, then stored as float32).
    Every argument is checked before anything is drawn (``ValueError`` naming it).
    """
    d = check_int("d", d, 1)
    width = check_int("width", width, 1)
    c = check_int("c", c, 1)
    n_train = check_int("n_train", n_train, 1)
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    rs = np.random.RandomState(seed)
    A = rs.standard_normal((width, d))
    B = rs.standard_normal((c, width)) / width
    X = rs.standard_normal((n_train + n_test, d))
    y = np.maximum(X @ A.T, 0.0) @ B.T
    J = teacher_jacobian(A, B, X)

    def f32(a):
        return torch.as_tensor(a, dtype=torch.float32)

    return NetTask(name="teacher_student", kind="regression",
                   X_train=f32(X[:n_train]), y_train=f32(y[:n_train]),
                   X_test=f32(X[n_train:]), y_test=f32(y[n_train:]), n_classes=None,
                   J_train=f32(J[:n_train]), J_test=f32(J[n_train:]),
                   note=f"A random ReLU teacher (d={d}, width={width}, c={c}, no biases) on Gaussian "
                        f"inputs, {n_train} training and {n_test} test points, drawn with seed {seed}.")


def modular_addition(p: int = 97, train_fraction: float = 0.4, *, encoding: str = "one_hot",
                     seed: int = 0) -> NetTask:
    r"""Modular addition (Appendix E.3, Figures 51–56): all :math:`p^2` pairs :math:`(x_1, x_2)`,
    label :math:`(x_1 + x_2) \bmod p`, ``n_classes = p``.

    The split is a seeded random permutation of the pairs (pair :math:`x_1 p + x_2`) whose first
    :math:`\lfloor \text{train\_fraction}\cdot p^2\rfloor` are the training set: the floor of
    scikit-learn's ``train_test_split(train_size=train_fraction)`` that the authors' code uses
    (3763 training and 5646 test pairs for p = 97 and 0.4, where rounding would give 3764).

    ``encoding``: ``"one_hot"``, X float32 (N, 2, p), row k the one-hot vector of :math:`x_{k+1}`
    (the MLP's input, spec §3.10.2); ``"sequence"``, X int64 (N, 4), the tokens
    :math:`[x_1, p, x_2, p + 1]` (p is "+", p + 1 is "="; a vocabulary of p + 2 tokens, the
    LSTM's input of Figures 54–56).

    Every argument is checked before anything is drawn (``ValueError`` naming it); so is a split
    that leaves the training or the test set empty.
    """
    p = check_int("p", p, 2)
    train_fraction = check_range("train_fraction", train_fraction, 0.0, 1.0, closed="neither")
    encoding = check_option("encoding", encoding, ENCODINGS)
    seed = check_seed("seed", seed)
    pairs = p * p
    n_train = math.floor(train_fraction * pairs)      # sklearn's rule for a float train_size
    if not 1 <= n_train <= pairs - 1:
        raise ValueError(f"train_fraction must leave at least one training and one test pair, i.e. "
                         f"floor(train_fraction * p**2) in [1, p**2 - 1] = [1, {pairs - 1}], "
                         f"got {show(train_fraction)} (floor({show(train_fraction)} * {pairs}) = {n_train})")
    order = np.random.RandomState(seed).permutation(pairs)
    x1, x2 = order // p, order % p
    labels = torch.as_tensor((x1 + x2) % p, dtype=torch.int64)
    if encoding == "one_hot":
        X = torch.zeros(pairs, 2, p, dtype=torch.float32)
        rows = torch.arange(pairs)
        X[rows, 0, torch.as_tensor(x1)] = 1.0
        X[rows, 1, torch.as_tensor(x2)] = 1.0
    else:
        X = torch.as_tensor(np.stack([x1, np.full(pairs, p), x2, np.full(pairs, p + 1)], axis=1),
                            dtype=torch.int64)
    return NetTask(name="modular_addition", kind="classification",
                   X_train=X[:n_train].clone(), y_train=labels[:n_train].clone(),
                   X_test=X[n_train:].clone(), y_test=labels[n_train:].clone(), n_classes=p,
                   note=f"All {pairs} pairs of (x1 + x2) mod {p}, encoded {encoding}, split by seed {seed} "
                        f"into {n_train} training and {pairs - n_train} test pairs.")


def _mnist_files(folder: Path, source: str) -> dict[str, Path]:
    """The four MNIST IDX files in ``folder`` or ``folder/MNIST/raw`` (each plain or ``.gz``)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"MNIST folder {str(folder)!r} ({source}) does not exist or is not a folder")
    missing = {}
    for where in (folder, folder / "MNIST" / "raw"):
        found = {}
        for name in MNIST_FILES:
            path = next((where / (name + ext) for ext in ("", ".gz") if (where / (name + ext)).is_file()), None)
            if path is not None:
                found[name] = path
        if len(found) == len(MNIST_FILES):
            return found
        missing[where] = [name for name in MNIST_FILES if name not in found]
    raise FileNotFoundError(
        f"MNIST folder {str(folder)!r} ({source}) lacks the MNIST IDX files: "
        + "; ".join(f"{str(where)!r} misses {', '.join(names)}" for where, names in missing.items())
        + " (each file may also be gzipped, with a .gz suffix)")


def _read_idx(path: Path) -> np.ndarray:
    import idx2numpy
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
        try:
            return idx2numpy.convert_from_string(f.read())
        except (idx2numpy.FormatError, ValueError, OSError) as error:
            raise ValueError(f"{str(path)!r} is not an IDX file: {error}") from None


def _mnist_split(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    images, labels = _read_idx(images_path), _read_idx(labels_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"{str(images_path)!r} must hold uint8 images (N, height, width), "
                         f"got {images.dtype} of shape {images.shape}")
    if labels.shape != images.shape[:1] or labels.size and not 0 <= labels.min() <= labels.max() <= 9:
        raise ValueError(f"{str(labels_path)!r} must hold {images.shape[0]} labels in [0, 9], "
                         f"got shape {labels.shape}")
    return images.reshape(images.shape[0], -1).astype(np.float32) / 255.0, labels.astype(np.int64)


def mnist(folder: str | os.PathLike | None = None, *, n_train: int = 1000, n_test: int = 1000,
          seed: int = 0) -> NetTask:
    r"""Digit classification (Appendix E.4, Figure 57): ``n_train`` and ``n_test`` images drawn
    (seeded, without replacement) from MNIST's training and test files, scaled to [0, 1] and
    flattened (28·28 = 784 features), labels int64 in [0, 9].

    ``folder`` (else the environment variable ``GROKKIT_MNIST``) holds the standard IDX files
    ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte`` and
    ``t10k-labels-idx1-ubyte``, each possibly gzipped (``.gz``), in the folder itself or in
    ``folder/MNIST/raw`` as torchvision lays them out; they are read with ``idx2numpy``
    (torchvision is not used: the registry's torchvision wheel is a CUDA build that does not
    import against the project's CPU torch). Nothing is ever downloaded. A folder that was named
    and does not exist or lacks a file is a ``FileNotFoundError`` naming it and the missing files.

    With no folder named (neither argument nor variable), the task is scikit-learn's bundled
    UCI optical-recognition digits instead (1797 images, 8·8 = 64 features, values 0–16 scaled
    to [0, 1]; *not MNIST*, said in ``note``): a seeded split of ``n_train`` training images
    (at most 1796) and ``min(n_test, 1797 - n_train)`` test images (797 for ``n_train=1000``).

    The arguments are checked before anything is read (``ValueError`` naming them); ``n_train``
    and ``n_test`` against the sizes of the files once read.
    """
    if folder is not None and not isinstance(folder, (str, os.PathLike)):
        raise ValueError(f"folder must be a path (str or os.PathLike) or None, got {show(folder)}")
    n_train = check_int("n_train", n_train, 1)
    n_test = check_int("n_test", n_test, 1)
    seed = check_seed("seed", seed)
    source = "the folder argument"
    if folder is None:
        folder = os.environ.get(MNIST_ENV, "").strip() or None
        source = f"the environment variable {MNIST_ENV}"
    rs = np.random.RandomState(seed)
    if folder is None:
        from sklearn.datasets import load_digits
        digits = load_digits()
        total = digits.data.shape[0]
        n_train = check_int("n_train", n_train, 1, total - 1, high_name="the digits less one")
        n_test = min(n_test, total - n_train)
        order = rs.permutation(total)
        X = digits.data.astype(np.float32) / 16.0
        y = digits.target.astype(np.int64)
        train, test = order[:n_train], order[n_train:n_train + n_test]
        note = (f"scikit-learn's bundled UCI optical-recognition 8x8 digits (not MNIST: no MNIST folder "
                f"was named with folder or {MNIST_ENV}), {n_train} training and {n_test} test images "
                f"drawn with seed {seed}.")
        X_train, y_train, X_test, y_test = X[train], y[train], X[test], y[test]
    else:
        folder = Path(folder).expanduser()
        files = _mnist_files(folder, source)
        X_tr, y_tr = _mnist_split(files[MNIST_FILES[0]], files[MNIST_FILES[1]])
        X_te, y_te = _mnist_split(files[MNIST_FILES[2]], files[MNIST_FILES[3]])
        n_train = check_int("n_train", n_train, 1, len(y_tr), high_name="the training images")
        n_test = check_int("n_test", n_test, 1, len(y_te), high_name="the test images")
        train = rs.choice(len(y_tr), n_train, replace=False)
        test = rs.choice(len(y_te), n_test, replace=False)
        X_train, y_train, X_test, y_test = X_tr[train], y_tr[train], X_te[test], y_te[test]
        note = (f"MNIST read from {str(files[MNIST_FILES[0]].parent)!r}, {n_train} training and "
                f"{n_test} test images drawn with seed {seed}.")
    return NetTask(name="mnist", kind="classification",
                   X_train=torch.as_tensor(X_train), y_train=torch.as_tensor(y_train),
                   X_test=torch.as_tensor(X_test), y_test=torch.as_tensor(y_test), n_classes=10, note=note)
