r"""Update rules for matrix factorization (paper §2 and Appendix D), batched over configurations.

The objective is, for a linear measurement operator :math:`\mathcal X`,

.. math:: f(A) = \tfrac12\|\mathcal X(A) - y^*\|_2^2 + \tfrac{\beta_2}{2}\|A\|_F^2 + \beta_*\|A\|_*,

with :math:`h(A) = UV^\top` (thin SVD :math:`A = U\Sigma V^\top`) a subgradient of
:math:`\|A\|_*` (eq. 101). Iterates have shape (G, n1, n2), hyper-parameters (G, 1, 1).
:class:`Measurements` is :math:`\mathcal X`: matrix completion reads the entries of a mask
(never an N × n1n2 matrix), matrix sensing applies a dense (N, n1n2) matrix to the
column-major :math:`\operatorname{vec} A`.

The deep factorization :math:`A = \mathcal A_1\cdots\mathcal A_L` (§D.11, eqs. 128–130) keeps its
factors as a list of (G, d_{k-1}, d_k) tensors (:func:`deep_init`, :func:`deep_step`); so do the
two-factor models of the background papers (:func:`two_factor`, the last section): Woodworth et
al.'s :math:`UV^\top` of width k and Lyu et al.'s :math:`UU^\top - VV^\top` with weight decay.

:func:`subgradient`, :func:`projected_subgradient`, :func:`proximal`, :func:`deep` and
:func:`two_factor` run the steps in the loop every kernel family shares
(:func:`grokkit.kernels.run.run`: schedule, records, early stop, divergence), with the matrix
family's records (:class:`MatrixTrajectory`); :data:`DEEP` and :data:`TWO_FACTOR` iterate on the
factors and record their product. On the CPU, completion problems run the first three on the
fused steps of :mod:`grokkit.kernels.fused` (a one-sided Jacobi SVD in C, where a compiler and
AVX2/FMA are available; ``GROKKIT_FUSED=0`` switches them off), recorded through the same
curves; matrix sensing (a dense X), the factorizations and decaying steps (``alpha_decay``) run on
the PyTorch steps.
"""
from __future__ import annotations

import copy
import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from grokkit._checks import check_finite, check_grid, check_int, check_option, check_range, check_seed, show
from grokkit.cache import cached
from grokkit.kernels import fused, persistent
from grokkit.kernels.run import (MAX_STEPS, Family, check_step_size, compiled, configurations, resolve_device,
                                 run)

KINDS = ("completion", "sensing")
DEEP_INITS = ("random", "identity")


class Measurements:
    r"""The measurement operator :math:`\mathcal X` and its adjoint, shared by every
    configuration or one per configuration (a leading G axis).

    ``completion``: ``mask`` (n1, n2) or (G, n1, n2) boolean, :math:`\mathcal X(A) = A[\text{mask}]`
    in row-major order of the mask (as ``A_star[mask]``), the same number N of entries in every
    configuration. ``sensing``: ``X`` (N, n1 n2) or (G, N, n1 n2),
    :math:`\mathcal X(A) = X\operatorname{vec}(A)` with column-major vec (Lemma D.14's convention).
    """

    def __init__(self, kind: str, shape: tuple[int, int], *, mask: torch.Tensor | None = None,
                 X: torch.Tensor | None = None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {show(kind)}")
        n1, n2 = shape
        self.kind, self.shape = kind, (n1, n2)
        if kind == "completion":
            if mask is None or mask.dtype != torch.bool or tuple(mask.shape[-2:]) != (n1, n2) or mask.dim() > 3:
                raise ValueError(f"mask must be a boolean tensor of shape ({n1}, {n2}) or (G, {n1}, {n2}), got "
                                 f"{'None' if mask is None else f'{mask.dtype} of shape {tuple(mask.shape)}'}")
            counts = mask.reshape(-1, n1 * n2).sum(dim=1)
            if not (counts == counts[0]).all() or int(counts[0]) == 0:
                raise ValueError(f"mask must observe the same number N >= 1 of entries in every configuration, "
                                 f"got {counts.tolist()}")
            self.mask, self.N = mask, int(counts[0])
            # Flat row-major indices of the observed entries: gather/scatter instead of boolean indexing.
            self.index = mask.reshape(-1, n1 * n2).nonzero()[:, 1].reshape(-1, self.N)
        else:
            if X is None or X.dim() not in (2, 3) or X.shape[-1] != n1 * n2:
                raise ValueError(f"X must have shape (N, {n1 * n2}) or (G, N, {n1 * n2}) for {n1}x{n2} matrices, "
                                 f"got {'None' if X is None else tuple(X.shape)}")
            self.X, self.N = X, X.shape[-2]
            self._gram_inv: torch.Tensor | None = None  # (XX^T)^-1, for the projection

    @property
    def batched(self) -> bool:
        """Whether the operator is one per configuration (a leading G axis)."""
        return (self.mask if self.kind == "completion" else self.X).dim() == 3

    def select(self, keep: torch.Tensor) -> Measurements:
        """The operator of the configurations in ``keep`` (a shared operator is returned as is)."""
        if not self.batched:
            return self
        out = copy.copy(self)
        if self.kind == "completion":
            out.mask, out.index = self.mask[keep], self.index[keep]
        else:
            out.X = self.X[keep]
            out._gram_inv = None if self._gram_inv is None else self._gram_inv[keep]
        return out

    def project(self, A: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r"""The projection onto :math:`\{A : \mathcal X(A) = y\}` (§D.7). Completion: the observed
        entries set to ``y``. Sensing: :math:`A - \mathcal X^*((XX^\top)^{-1}(\mathcal X(A) - y))`
        (X of full row rank)."""
        G = A.shape[0]
        if self.kind == "completion":
            flat = A.flatten(1).clone()
            flat.scatter_(1, self.index.expand(G, -1), y.expand(G, -1))
            return flat.reshape(A.shape)
        if self._gram_inv is None:
            self._gram_inv = torch.linalg.inv(self.X @ self.X.mT)
        r = self(A) - y
        correction = (r @ self._gram_inv.mT if self._gram_inv.dim() == 2
                      else torch.bmm(self._gram_inv, r.unsqueeze(-1)).squeeze(-1))
        return A - self.adjoint(correction)

    def __call__(self, A: torch.Tensor) -> torch.Tensor:
        r""":math:`\mathcal X(A)` for every matrix of ``A`` (G, n1, n2): shape (G, N)."""
        G = A.shape[0]
        if self.kind == "completion":
            return torch.gather(A.flatten(1), 1, self.index.expand(G, -1))
        vec = A.mT.flatten(1)
        return vec @ self.X.mT if self.X.dim() == 2 else torch.bmm(self.X, vec.unsqueeze(-1)).squeeze(-1)

    def adjoint(self, r: torch.Tensor) -> torch.Tensor:
        r""":math:`\mathcal X^*(r)` for every row of ``r`` (G, N): shape (G, n1, n2)."""
        G, (n1, n2) = r.shape[0], self.shape
        if self.kind == "completion":
            out = torch.zeros(G, n1 * n2, dtype=r.dtype, device=r.device)
            return out.scatter_(1, self.index.expand(G, -1), r).reshape(G, n1, n2)
        vec = r @ self.X if self.X.dim() == 2 else torch.bmm(r.unsqueeze(1), self.X).squeeze(1)
        return vec.reshape(G, n2, n1).mT


def nuclear_subgradient(A: torch.Tensor) -> torch.Tensor:
    r""":math:`h(A) = UV^\top` from the thin SVD of every matrix of ``A`` (eq. 101)."""
    U, _, Vh = torch.linalg.svd(A, full_matrices=False)
    return U @ Vh


def nuclear_iterates(A, alpha: float, steps: int, beta_star: float = 1.0, *, svd: str = "thin",
                     tol: float = 1e-9) -> np.ndarray:
    r"""The pure nuclear-norm subgradient dynamics of Theorem D.12 (eqs. 121 and 125, no data term):
    :math:`A^{(t+1)} = A^{(t)} - \alpha\beta_* U^{(t)}V^{(t)\top}`, from ``A`` (n1, n2), ``steps`` updates,
    in float64 on the CPU. ``svd="thin"``: :math:`UV^\top = h(A)` of :func:`nuclear_subgradient` (all
    min(n1, n2) singular vectors, as the kernels); ``svd="compact"``: only the singular vectors of the
    singular values above ``tol`` times αβ* (the theorem's compact SVD: a singular value that has
    reached 0 is not kicked again). Returns the iterates (steps + 1, n1, n2), row k after k updates;
    :func:`grokkit.theory.matrix.nuclear_singular_values` predicts their singular values."""
    check_finite("A", A)
    A = torch.as_tensor(np.asarray(A, dtype=float))
    if A.dim() != 2:
        raise ValueError(f"A must be a matrix (2-d array), got shape {tuple(A.shape)}")
    step = check_range("alpha", alpha, 0.0, closed="neither") * \
        check_range("beta_star", beta_star, 0.0, closed="neither")
    steps = check_int("steps", steps, 0, MAX_STEPS)
    check_option("svd", svd, ("thin", "compact"))
    tol = check_range("tol", tol, 0.0, 1.0, closed="left")
    out = torch.empty((steps + 1,) + tuple(A.shape), dtype=torch.float64)
    out[0] = A
    for k in range(steps):
        if svd == "thin":
            H = nuclear_subgradient(A)
        else:
            U, S, Vh = torch.linalg.svd(A, full_matrices=False)
            keep = S > tol * step
            H = U[:, keep] @ Vh[keep]
        A = A - step * H
        out[k + 1] = A
    return out.numpy()


def singular_value_threshold(Z: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    r"""The proximal map of :math:`\gamma\|\cdot\|_*`: :math:`U\max(\Sigma - \gamma, 0)V^\top`
    for every matrix of ``Z``, ``gamma`` of shape (G, 1, 1)."""
    U, S, Vh = torch.linalg.svd(Z, full_matrices=False)
    return (U * torch.clamp(S - gamma[..., 0], min=0.0).unsqueeze(-2)) @ Vh


def data_gradient(A: torch.Tensor, op: Measurements, y: torch.Tensor, beta2: torch.Tensor | None) -> torch.Tensor:
    r""":math:`G_{\beta_2}(A) = \mathcal X^*(\mathcal X(A) - y^*) + \beta_2 A`."""
    grad = op.adjoint(op(A) - y)
    return grad if beta2 is None else grad + beta2 * A


def subgradient_step(A, op, y, alpha, beta_star, beta2):
    r"""Subgradient descent (eq. 101): :math:`A \leftarrow A - \alpha(G_{\beta_2}(A) + \beta_* h(A))`."""
    return A - alpha * (data_gradient(A, op, y, beta2) + beta_star * nuclear_subgradient(A))


def proximal_step(A, op, y, alpha, beta_star, beta2):
    r"""Proximal gradient with singular-value thresholding:
    :math:`A \leftarrow \operatorname{SVT}_{\alpha\beta_*}(A - \alpha G_{\beta_2}(A))`."""
    return singular_value_threshold(A - alpha * data_gradient(A, op, y, beta2), alpha * beta_star)


def projected_subgradient_step(A, op, y, alpha, beta_star, beta2):
    r"""Projected subgradient descent on :math:`\{A : \mathcal X(A) = y^*\}` (§D.7):
    :math:`A \leftarrow \Pi(A - \alpha(\beta_2 A + \beta_* h(A)))`, :math:`\Pi` = :meth:`Measurements.project`.
    (The authors' code also subtracts the data gradient, which lies in the row space that
    :math:`\Pi` removes: the same iterates.)"""
    direction = beta_star * nuclear_subgradient(A)
    if beta2 is not None:
        direction = direction + beta2 * A
    return op.project(A - alpha * direction, y)


def factor_gradients(factors, grad):
    r"""Lemma D.14 without input checks (the kernels' inner loop; :func:`grokkit.theory.matrix.deep_gradients`
    checks and calls it): :math:`\partial f/\partial\mathcal A_k = (\prod_{i<k}\mathcal A_i)^\top
    \nabla g(A)(\prod_{i>k}\mathcal A_i)^\top` for k = 1 … L, with prefix and suffix products."""
    L = len(factors)
    prefix = [None] * L  # prefix[k] = A_1 ⋯ A_{k-1} (None = I)
    for k in range(1, L):
        prefix[k] = factors[0] if k == 1 else prefix[k - 1] @ factors[k - 1]
    suffix = [None] * L  # suffix[k] = A_{k+1} ⋯ A_L
    for k in range(L - 2, -1, -1):
        suffix[k] = factors[L - 1] if k == L - 2 else factors[k + 1] @ suffix[k + 1]
    out = []
    for k in range(L):
        G = grad if prefix[k] is None else prefix[k].swapaxes(-1, -2) @ grad
        out.append(G if suffix[k] is None else G @ suffix[k].swapaxes(-1, -2))
    return out


def product(factors) -> torch.Tensor:
    r""":math:`A = \mathcal A_1\cdots\mathcal A_L` for every configuration (eq. 128)."""
    A = factors[0]
    for F in factors[1:]:
        A = A @ F
    return A


def deep_init(n1: int, n2: int, depth: int, init_scale: float, *, G: int = 1, init: str = "random",
              seed: int = 0) -> list[torch.Tensor]:
    r"""The L factors :math:`\mathcal A_1 \in \mathbb R^{n_1\times d}`, :math:`\mathcal A_k \in \mathbb R^{d\times d}`,
    :math:`\mathcal A_L \in \mathbb R^{d\times n_2}`, d = max(n1, n2) (one factor n1 × n2 for L = 1), each
    (G, d_{k-1}, d_k) in float64, the same for every configuration.

    ``"random"``: :math:`\zeta\,\mathcal N(0, 1/(d_{k-1}d_k))` entries, the paper's
    :math:`\zeta\mathcal N(0, 1/n)` with n the factor's number of entries (the authors' code's
    variances), drawn factor after factor from ``RandomState(seed)``. ``"identity"``: the
    authors' default :math:`\zeta I` (rectangular), so :math:`A^{(1)} = \zeta^L I`."""
    n1, n2 = check_int("n1", n1, 1), check_int("n2", n2, 1)
    depth, G = check_int("depth", depth, 1), check_int("G", G, 1)
    init_scale = check_range("init_scale", init_scale, 0.0, closed="left")
    check_option("init", init, DEEP_INITS)
    seed = check_seed("seed", seed)
    d = max(n1, n2)
    dims = [n1, n2] if depth == 1 else [n1] + [d] * (depth - 1) + [n2]
    rng = np.random.RandomState(seed)
    factors = []
    for rows, cols in zip(dims[:-1], dims[1:]):
        F = np.eye(rows, cols) if init == "identity" else rng.randn(rows, cols) / np.sqrt(rows * cols)
        factors.append(torch.as_tensor(init_scale * F, dtype=torch.float64).expand(G, rows, cols).clone())
    return factors


def deep_step(factors, op, y, alpha, beta_star, beta2):
    r"""One simultaneous update of every factor of the deep factorization (eqs. 128–130, Lemma D.14):
    :math:`\mathcal A_k \leftarrow (1 - \alpha\beta_2)\mathcal A_k - \alpha(\prod_{i<k}\mathcal A_i)^\top
    G(A)(\prod_{i>k}\mathcal A_i)^\top - \alpha\beta_* h(\mathcal A_k)`, :math:`G(A) = \mathcal X^*(\mathcal X(A) - y^*)`,
    for the objective :math:`\tfrac12\|\mathcal X(A) - y^*\|^2 + \tfrac{\beta_2}2\sum_k\|\mathcal A_k\|_F^2
    + \beta_*\sum_k\|\mathcal A_k\|_*` (the authors' ``sparse_recovery/matrix_factorization.py`` is right only for L = 2, β₂ = 0)."""
    grads = factor_gradients(factors, data_gradient(product(factors), op, y, None))
    nuclear = bool(beta_star.any())
    out = []
    for F, update in zip(factors, grads):
        if beta2 is not None:
            update = update + beta2 * F
        if nuclear:  # NaN (a diverged configuration) made finite: LAPACK's SVD fails on it
            update = update + beta_star * nuclear_subgradient(torch.nan_to_num(F))
        out.append(F - alpha * update)
    return out


# ----------------------------------------------------------------------------- the kernels

CURVES = ("train_error", "test_error", "nuclear", "frobenius", "grad_ratio")
FINITE = ("train_error", "test_error", "nuclear", "frobenius")


@dataclass
class MatrixTrajectory:
    r"""Recorded run of G configurations on a matrix problem (numpy, float64); for the deep
    factorization (:func:`deep`), of the product :math:`A = \mathcal A_1\cdots\mathcal A_L`.

    ``steps[j]`` is the number of updates at record j (0 is :math:`A^{(1)}`). Curves (G, T):
    relative training error :math:`\|\mathcal X(A) - y^*\|_2/\|y^*\|_2`, relative recovery error
    :math:`\|A - A^*\|_F/\|A^*\|_F`, :math:`\|A\|_*`, :math:`\|A\|_F` and the gradient ratio
    :math:`\|\beta_* h(A)\|_F/\|G_{\beta_2}(A)\|_F` (:math:`\|UV^\top\|_F = \sqrt{\min(n_1, n_2)}` with
    the thin SVD); for the deep factorization it compares the two terms of the update of all the
    factors' parameters together,
    :math:`\|\beta_*(h(\mathcal A_1), \dots, h(\mathcal A_L))\|_F/\|(G_{\beta_2}(\mathcal A_1), \dots,
    G_{\beta_2}(\mathcal A_L))\|_F`, :math:`G_{\beta_2}(\mathcal A_k)` the factor's gradient (eq. 129;
    NaN at an exact fit with :math:`\beta_2 = 0`, as for one factor). ``singular_values`` (G, T, min(n1, n2)) are all the singular values of
    :math:`A^{(t)}` at each record, in decreasing order. ``A`` holds the iterates (G, T, n1, n2)
    when recorded. ``stopped_at``, ``diverged``, ``backend``: as in
    :class:`grokkit.kernels.Trajectory`. ``depth`` is L (1 for the shallow kernels) and
    ``factor_nuclear`` (G, T) the penalty the deep factorization applies,
    :math:`\sum_k\|\mathcal A_k\|_*` (None for the shallow kernels, where it is ``nuclear``).
    The two-factor models (:func:`two_factor`) record two more curves (None elsewhere), over the
    entries their mask leaves unobserved: ``unobserved_error``, the root mean square of
    :math:`A - A^*` there, and ``unobserved_change``, that of :math:`A - A^{(1)}`.
    """

    method: str
    steps: np.ndarray
    config: dict[str, np.ndarray]
    train_error: np.ndarray
    test_error: np.ndarray
    nuclear: np.ndarray
    frobenius: np.ndarray
    grad_ratio: np.ndarray
    singular_values: np.ndarray
    A: np.ndarray | None
    A_final: np.ndarray
    diverged: np.ndarray
    stopped_at: np.ndarray
    device: str
    seconds: float
    backend: str = "torch"
    step_seconds: float = math.nan  # of seconds, those spent in the steps (the rest: records, set-up)
    depth: int = 1
    factor_nuclear: np.ndarray | None = None
    unobserved_error: np.ndarray | None = None
    unobserved_change: np.ndarray | None = None

    def __len__(self) -> int:
        return self.A_final.shape[0]

    @property
    def alpha_beta_star(self) -> np.ndarray:
        r""":math:`\alpha\beta_*` per configuration."""
        return self.config["alpha"] * self.config["beta_star"]


def _singular_values(A: torch.Tensor) -> torch.Tensor:
    """The singular values of every matrix of ``A`` (g, ...), NaN for a matrix with a non-finite
    entry (a diverged configuration: LAPACK's SVD fails on NaN)."""
    finite = torch.isfinite(A).flatten(1).all(dim=1)
    return torch.where(finite[:, None], torch.linalg.svdvals(torch.nan_to_num(A)), math.nan)


def _observe_factors(factors, data: dict, col: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    r"""The :data:`CURVES` (5, g) of the product A of ``factors`` and its singular values (g, min(n1, n2)).

    The gradient ratio compares the two terms of the update of the parameters, all the factors
    together: :math:`\|\beta_*(h(\mathcal A_1), \dots, h(\mathcal A_L))\|_F /
    \|(G_{\beta_2}(\mathcal A_1), \dots, G_{\beta_2}(\mathcal A_L))\|_F` with
    :math:`G_{\beta_2}(\mathcal A_k)` of eq. (129) and :math:`\|h(\mathcal A_k)\|_F = \sqrt{\min(d_{k-1}, d_k)}`;
    for one factor, :math:`\|\beta_* h(A)\|_F/\|G_{\beta_2}(A)\|_F` (eq. 101)."""
    op, y, A_star = data["op"], data["y"], data["A_star"]
    norm, fro = torch.linalg.vector_norm, (lambda M: torch.linalg.matrix_norm(M, ord="fro"))
    A = product(factors)
    r = op(A) - y
    grads = factor_gradients(factors, op.adjoint(r))
    grad = torch.cat([(g + col["beta2"] * F).flatten(1) for g, F in zip(grads, factors)], dim=1)
    sv = _singular_values(A)
    test = (fro(A - A_star) / fro(A_star) if A_star is not None else torch.full_like(sv[:, 0], math.nan))
    h_norm = col["beta_star"][:, 0, 0] * math.sqrt(sum(min(F.shape[-2:]) for F in factors))
    return torch.stack([norm(r, dim=-1) / norm(y, dim=-1), test, sv.sum(dim=-1), fro(A),
                        h_norm / norm(grad, dim=-1)]), [sv]


def _observe(A: torch.Tensor, data: dict, col: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The :data:`CURVES` (5, g) of every matrix of ``A`` and its singular values (g, min(n1, n2))."""
    return _observe_factors([A], data, col)


def _observe_deep(factors, data: dict, col: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    r"""The :data:`DEEP_CURVES` (6, g): the :data:`CURVES` of the product, then :math:`\sum_k\|\mathcal A_k\|_*`."""
    values, traces = _observe_factors(factors, data, col)
    penalty = sum(_singular_values(F).sum(dim=-1) for F in factors)
    return torch.cat([values, penalty[None]]), traces


def _result(*, curves, iterates, final, traces, **fields) -> MatrixTrajectory:
    return MatrixTrajectory(**fields, **curves, singular_values=traces["singular_values"], A=iterates, A_final=final)


MATRIX = Family(penalty="beta_star", curves=CURVES, finite=FINITE, operands=("op", "y"), target="A_star",
                evaluate=_observe, result=_result, unbatched={"A_star": 2}, traces=("singular_values",),
                fused=compiled(fused.matrix_steps, persistent.matrix_steps))

DEEP_CURVES = CURVES + ("factor_nuclear",)
# The deep factorization: the iterate is the list of factors, the product is recorded.
DEEP = Family(penalty="beta_star", curves=DEEP_CURVES, finite=FINITE + ("factor_nuclear",), operands=("op", "y"),
              target="A_star", evaluate=_observe_deep, result=_result, unbatched={"A_star": 2},
              traces=("singular_values",), view=product)


def _array(name: str, value, ndim: int, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim not in (ndim, ndim + 1):
        raise ValueError(f"{name} must have shape {what} or (G, {what[1:]}, got shape {array.shape}")
    return array


def _prepare(operator, y, shape, A_star, method, alpha, beta_star, beta2, init_scale, alpha_decay, init, seed,
             device, depth=1):
    """Validate every argument and move the problem to ``device``; nothing is computed before this.
    Returns the data, the configurations and the ``depth`` initial factors (:func:`deep_init`, each
    scaled by the configuration's ``init_scale``)."""
    device = resolve_device(device)
    check_option("init", init, DEEP_INITS)
    seed = check_seed("seed", seed)
    n1, n2 = _shape(shape)
    config = configurations(alpha=alpha, beta_star=beta_star, beta2=beta2, init_scale=init_scale,
                            **({} if alpha_decay is None else {"alpha_decay": alpha_decay}))
    data, config = _problem(operator, y, (n1, n2), A_star, config, device)
    op = data["op"]
    lam = 1.0 if op.kind == "completion" else torch.linalg.matrix_norm(op.X, ord=2).cpu().numpy() ** 2
    check_step_size(config, lam)
    if method == "projected_subgradient" and op.kind == "sensing":
        if op.N > n1 * n2 or torch.linalg.matrix_rank(op.X).min().item() < op.N:
            raise ValueError(f"projected_subgradient needs rank(X) = N <= n1*n2 so that {{X(A) = y}} is a "
                             f"nonempty affine set, got N = {op.N}, n1*n2 = {n1 * n2}")
    scale = torch.as_tensor(config["init_scale"], dtype=torch.float64)[:, None, None]
    factors = [(scale * F[0]).to(device) for F in deep_init(n1, n2, depth, 1.0, init=init, seed=seed)]
    return data, config, factors


def _shape(shape) -> tuple[int, int]:
    if not (isinstance(shape, (tuple, list)) and len(shape) == 2):
        raise ValueError(f"shape must be a pair (n1, n2), got {show(shape)}")
    return check_int("n1", shape[0], 1), check_int("n2", shape[1], 1)


def _problem(operator, y, shape, A_star, config, device) -> tuple[dict, dict[str, np.ndarray]]:
    """Validate the operator (a boolean mask or a sensing X), ``y`` and ``A_star`` against ``shape``
    and the grid ``config`` (a one-configuration grid is repeated to the operator's, y's or A_star's
    G); returns the data on ``device`` (``op`` a :class:`Measurements`, ``y``, ``A_star``) and the grid."""
    n1, n2 = shape
    operator = np.asarray(operator)
    kind = "completion" if operator.dtype == bool else "sensing"
    if kind == "completion":
        operator = _array("mask", operator, 2, f"({n1}, {n2})")
    else:
        operator = _array("X", operator, 2, f"(N, {n1 * n2})")
        check_finite("X", operator, real=True)
    y = _array("y", y, 1, "(N,)")
    check_finite("y", y, real=True)
    if not np.linalg.norm(np.atleast_2d(y), axis=-1).all():
        raise ValueError("y must be nonzero: the relative training error divides by its norm, got all zeros")
    if A_star is not None:
        A_star = _array("A_star", A_star, 2, f"({n1}, {n2})")
        if A_star.shape[-2:] != (n1, n2):
            raise ValueError(f"A_star must have shape ({n1}, {n2}) or (G, {n1}, {n2}), got {A_star.shape}")
        check_finite("A_star", A_star, real=True)
        if not np.linalg.norm(A_star.reshape(-1, n1 * n2), axis=-1).all():
            raise ValueError("A_star must be nonzero: the relative recovery error divides by its norm")
    G = config["alpha"].size
    if G == 1:
        leading = [a.shape[0] for a, k in ((operator, 2), (y, 1), (A_star, 2)) if a is not None and a.ndim == k + 1]
        G = max(leading, default=1)
        config = {k: np.repeat(v, G) for k, v in config.items()}
    for name, array, k in (("operator", operator, 2), ("y", y, 1), ("A_star", A_star, 2)):
        if array is not None and array.ndim == k + 1 and array.shape[0] != G:
            raise ValueError(f"{name} has {array.shape[0]} configurations, the grid {G}")
    tensor = torch.as_tensor(operator, dtype=torch.bool if kind == "completion" else torch.float64).to(device)
    op = Measurements(kind, (n1, n2), **{"mask" if kind == "completion" else "X": tensor})
    if y.shape[-1] != op.N:
        raise ValueError(f"y must have N = {op.N} entries (the measurements of the operator), got shape {y.shape}")
    data = {"op": op, "y": torch.as_tensor(y, dtype=torch.float64).to(device),
            "A_star": None if A_star is None else torch.as_tensor(A_star, dtype=torch.float64).to(device)}
    return data, config


def _kernel(method: str, step, rule: str):
    """The public function of one update rule."""
    def kernel(operator, y, shape, *, alpha, beta_star, beta2=0.0, steps, A_star=None, init_scale=1e-6,
               alpha_decay=None, init="random", seed=0, record_A=False, dense=1000, per_decade=100,
               stop_periodic=True, device="auto", progress=None) -> MatrixTrajectory:
        steps = check_int("steps", steps, 1, MAX_STEPS)
        check_int("dense", dense, 0)
        check_int("per_decade", per_decade, 1)
        data, config, (A0,) = _prepare(operator, y, shape, A_star, method, alpha, beta_star, beta2, init_scale,
                                       alpha_decay, init, seed, device)
        G, (n1, n2) = A0.shape[0], A0.shape[1:]
        return run(MATRIX, method, step, data, config, A0, steps, work=G * n1 * n2 * (data["op"].N + min(n1, n2)),
                   record=record_A, dense=dense, per_decade=per_decade, stop_periodic=stop_periodic,
                   progress=progress)

    kernel.__name__ = kernel.__qualname__ = method
    kernel.__doc__ = rf"""{rule}

    ``operator``: a boolean mask (n1, n2) or (G, n1, n2) for matrix completion, or a matrix X
    (N, n1·n2) or (G, N, n1·n2) for matrix sensing (column-major vec); ``y`` (N,) or (G, N), with
    completion's entries in row-major order of the mask (``A_star[mask]``); ``shape`` = (n1, n2).
    ``alpha`` (< 2/(λ_max + β₂), checked; λ_max = 1 for completion), ``beta_star``, ``beta2`` and
    ``init_scale`` are scalars or (G,) grids (:func:`grokkit.kernels.grid`). ``alpha_decay`` = b
    (None, a scalar or a (G,) grid in [0, inf]) makes the step decay,
    :math:`\alpha_t = \alpha(1+b)/(b+t)` at update t = 1, 2, … (:func:`grokkit.kernels.run.step_size`:
    :math:`\alpha_1 = \alpha`, square-summable but not summable, Corollary D.1); None or inf is the
    constant step α; the stability check applies to :math:`\alpha = \max_t\alpha_t`, and the
    trajectory's ``config`` then holds ``alpha_decay``. ``A_star`` gives the recovery error.
    :math:`A^{{(1)}} = \zeta\tilde A` with ``init`` "random" (:math:`\mathcal N(0, 1/(n_1n_2))`
    entries from ``seed``) or "identity". ``record_A`` keeps
    the iterates; ``dense``, ``per_decade``, ``stop_periodic``, ``device``, ``progress`` as for the
    sparse kernels (:func:`grokkit.kernels.subgradient`). On the CPU, completion runs on the fused
    steps of :mod:`grokkit.kernels.fused` where they can be built, sensing on the PyTorch steps
    (``MatrixTrajectory.backend`` says which). Returns a :class:`MatrixTrajectory`;
    raises ``ValueError`` before any compute for a bad input; warns ``RuntimeWarning`` naming the
    configurations that diverged."""
    return cached(kernel)


subgradient = _kernel(
    "subgradient", subgradient_step,
    r"""Subgradient descent on the nuclear norm, eq. (101):
    :math:`A^{(t+1)} = A^{(t)} - \alpha(G_{\beta_2}(A^{(t)}) + \beta_* h(A^{(t)}))`, :math:`h(A) = UV^\top`.""")
projected_subgradient = _kernel(
    "projected_subgradient", projected_subgradient_step,
    r"""Projected subgradient, §D.7: :math:`A^{(t+1)} = \Pi(A^{(t)} - \alpha(\beta_2 A^{(t)} + \beta_* h(A^{(t)})))`,
    :math:`\Pi` the projection onto :math:`\{\mathcal X(A) = y^*\}` (sensing needs rank X = N <= n1 n2).""")
proximal = _kernel(
    "proximal", proximal_step,
    r"""Proximal gradient with singular-value thresholding, eq. (127):
    :math:`A^{(t+1)} = S_{\alpha\beta_*}(A^{(t)} - \alpha G_{\beta_2}(A^{(t)}))`.""")

METHODS = {"subgradient": subgradient, "projected_subgradient": projected_subgradient, "proximal": proximal}


def completion_sweep(A_star: np.ndarray, N, tau, *, method: str = "subgradient", seed: int = 0,
                     **hyper) -> dict[int, MatrixTrajectory]:
    r"""Matrix completion of ``A_star`` for every number of observed entries of the grid ``N``
    and every τ of the grid ``tau`` (Appendix D.10, data selection by local coherence).

    For each N, the masks and entries of :func:`grokkit.data.matrix.completion_masks` (one per τ, all
    observing N entries, drawn with ``seed``) and one batched call of the kernel ``method``
    (:data:`METHODS`), its configurations the τ values in order, with ``A_star`` for the
    recovery error, ``seed`` for the initialisation and ``hyper`` its other keyword arguments
    (``alpha``, ``beta_star``, ``steps``, ``init_scale``, ``init``, …): the calls of one N are
    those a single-N page makes, so the result cache serves them to both. Returns
    ``{N: MatrixTrajectory}``; ``method``, every N and τ are checked before any run."""
    from grokkit.data.matrix import completion_masks

    check_option("method", method, tuple(METHODS))
    check_finite("A_star", A_star, real=True)
    A_star = np.asarray(A_star, dtype=float)
    if A_star.ndim != 2:
        raise ValueError(f"A_star must be a matrix (2-d array), got shape {A_star.shape}")
    sizes = [check_int("N", n, 1, A_star.size, high_name="n1*n2") for n in np.atleast_1d(np.asarray(N, dtype=object))]
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"N must be a grid of distinct values, got {show(N)}")
    problems = {n: completion_masks(A_star, n, tau, seed) for n in sizes}
    return {n: METHODS[method](masks, y, A_star.shape, A_star=A_star, seed=seed, **hyper)
            for n, (masks, y) in problems.items()}


@cached
def deep(operator, y, shape, *, depth, alpha, beta_star, beta2=0.0, steps, A_star=None, init_scale=1e-2,
         alpha_decay=None, init="random", seed=0, record_A=False, dense=1000, per_decade=100, stop_periodic=True,
         device="auto", progress=None) -> MatrixTrajectory:
    r"""Subgradient descent on the deep factorization :math:`A = \mathcal A_1\cdots\mathcal A_L`
    (§D.11, eqs. 128–130, :func:`deep_step`): every factor updated at once,
    :math:`\mathcal A_k \leftarrow (1 - \alpha\beta_2)\mathcal A_k - \alpha G(\mathcal A_k) - \alpha\beta_* h(\mathcal A_k)`,
    for :math:`\tfrac12\|\mathcal X(A) - y^*\|^2 + \tfrac{\beta_2}2\sum_k\|\mathcal A_k\|_F^2 + \beta_*\sum_k\|\mathcal A_k\|_*`.

    ``depth`` = L ≥ 1 factors of shapes n1 × d, d × d, …, d × n2 with d = max(n1, n2)
    (:func:`deep_init`; L = 1 is :func:`subgradient`, step for step). The initial factors are
    ``init_scale`` ζ times those of ``init``: "random", :math:`\zeta\mathcal N(0, 1/(d_{k-1}d_k))`
    entries drawn from ``seed`` (the paper's :math:`\zeta\mathcal N(0, 1/n)`), or "identity"
    (the authors' code: :math:`A^{(1)} = \zeta^L I`); the default ζ = 1e-2 is the paper's small
    scale for L > 1 (Figures 30–32). ``operator``, ``y``, ``shape``, ``A_star``, the grids
    ``alpha``, ``beta_star``, ``beta2``, ``init_scale`` and ``alpha_decay`` (a decaying step) are
    those of :func:`subgradient`, with the same checks; the shallow bound α < 2/(λ_max + β₂) is checked too, though a deeper
    model can need a smaller α (the product's scale enters its step): configurations that
    diverge are stopped and reported (``RuntimeWarning``). ``record_A`` keeps the products;
    ``dense``, ``per_decade``, ``stop_periodic`` (exactly periodic factors), ``device``,
    ``progress`` as for the other kernels.

    Returns a :class:`MatrixTrajectory` of the product A (errors, :math:`\|A\|_*`, its singular
    values, ``A_final``), with ``factor_nuclear`` the penalty :math:`\sum_k\|\mathcal A_k\|_*` and
    the gradient ratio over all the factors' parameters. Raises
    ``ValueError`` before any compute for a bad input (``depth`` an integer ≥ 1)."""
    depth = check_int("depth", depth, 1)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    check_int("dense", dense, 0)
    check_int("per_decade", per_decade, 1)
    data, config, factors = _prepare(operator, y, shape, A_star, "deep", alpha, beta_star, beta2, init_scale,
                                     alpha_decay, init, seed, device, depth)
    G, n1, n2 = factors[0].shape[0], *shape
    traj = run(DEEP, "deep", deep_step, data, config, factors, steps,
               work=G * (4 * depth * max(n1, n2) ** 3 + n1 * n2 * data["op"].N), record=record_A, dense=dense,
               per_decade=per_decade, stop_periodic=stop_periodic, progress=progress)
    traj.depth = depth
    return traj


# ----------------------------------------------------------------------------- background: two-factor models
#
# The two factorizations of the background papers, trained by plain gradient descent on both
# factors (G, n, k) at once: Woodworth et al. (2020) §6, the asymmetric W = UVᵀ of width k with
# i.i.d. Gaussian factors (Figure 5, Theorem 4), and Lyu et al. (2024) §3.3.3, W = UUᵀ − VVᵀ
# from U = V = ζI with weight decay (Figure 3, Corollary 3.11, Theorem 3.12).

TWO_FACTOR_MODELS = ("asymmetric", "symmetric")
TWO_FACTOR_CURVES = CURVES + ("unobserved_error", "unobserved_change")


def two_factor_product(factors, model: str) -> torch.Tensor:
    r"""W of the factors (U, V), each (G, n, k): :math:`UV^\top` (``"asymmetric"``, Woodworth et al. §6)
    or :math:`UU^\top - VV^\top` (``"symmetric"``, Lyu et al. §3.3.3)."""
    U, V = factors
    return U @ V.mT if model == "asymmetric" else torch.baddbmm(U @ U.mT, V, V.mT, alpha=-1.0)


def _weight_gradient(W: torch.Tensor, op: Measurements, y: torch.Tensor, M, Y) -> torch.Tensor:
    r""":math:`\mathcal X^*(\mathcal X(W) - y)`; for completion, :math:`M \odot W - Y` with M the mask as
    0/1 numbers and :math:`Y = \mathcal X^*(y)` (``M``, ``Y`` given: two operations, no gather or scatter)."""
    return M * W - Y if M is not None else op.adjoint(op(W) - y)


def _loss_scale(model: str, op: Measurements) -> float:
    """The factor of the data term's gradient: 2 for Woodworth et al.'s sum, 2/N for Lyu et al.'s mean."""
    return 2.0 if model == "asymmetric" else 2.0 / op.N


def two_factor_gradients(factors, op: Measurements, y: torch.Tensor, model: str, M=None, Y=None) -> list[torch.Tensor]:
    r"""The gradients of the data term with respect to U and V.

    ``"asymmetric"``: Woodworth et al.'s :math:`L = \sum_n(\langle X_n, UV^\top\rangle - y_n)^2`
    (§6, a sum), :math:`G = 2\mathcal X^*(r)` with :math:`r = \mathcal X(W) - y`,
    :math:`\nabla_U = GV`, :math:`\nabla_V = G^\top U`.
    ``"symmetric"``: Lyu et al.'s :math:`\frac1N\sum_n(\langle P_n, UU^\top - VV^\top\rangle - y_n)^2`
    (eq. 5, a mean), :math:`G = \frac2N\mathcal X^*(r)`, :math:`\nabla_U = (G + G^\top)U`,
    :math:`\nabla_V = -(G + G^\top)V`: the same with the symmetrised
    :math:`P_n = \frac12(e_{i_n}e_{j_n}^\top + e_{j_n}e_{i_n}^\top)` of their Appendix F, as
    :math:`\langle P_n, W\rangle = W_{i_nj_n}` for a symmetric W. ``M``, ``Y``: as :func:`_weight_gradient`."""
    U, V = factors
    G = _weight_gradient(two_factor_product(factors, model), op, y, M, Y) * _loss_scale(model, op)
    if model == "asymmetric":
        return [G @ V, G.mT @ U]
    S = G + G.mT
    return [S @ U, -(S @ V)]


def two_factor_step(factors, op, y, alpha, beta2, ridge, *, model: str, M=None, Y=None, **_):
    r"""One gradient step on both factors at once, :math:`U \leftarrow U - \alpha(\nabla_U + \beta_2U)`,
    :math:`V \leftarrow V - \alpha(\nabla_V + \beta_2V)` (:func:`two_factor_gradients`): gradient descent on
    the data term plus :math:`\frac{\beta_2}2(\|U\|_F^2 + \|V\|_F^2)`, Lyu et al.'s weight decay with
    :math:`\lambda = \beta_2` (eq. 5). ``ridge`` is ``beta2``, or None when it is 0 everywhere. Written
    :math:`U \leftarrow (1 - \alpha\beta_2)U - (\alpha G)V` and so on, one fused product a factor."""
    U, V = factors
    R = _weight_gradient(two_factor_product(factors, model), op, y, M, Y)
    if model == "symmetric":
        R = R + R.mT
    S = R * (alpha * _loss_scale(model, op))
    if ridge is not None:
        keep = 1.0 - alpha * ridge
        U, V = U * keep, V * keep
    if model == "asymmetric":
        return [torch.baddbmm(U, S, factors[1], alpha=-1.0), torch.baddbmm(V, S.mT, factors[0], alpha=-1.0)]
    return [torch.baddbmm(U, S, factors[0], alpha=-1.0), torch.baddbmm(V, S, factors[1])]


def _unobserved_rms(D: torch.Tensor, unseen: torch.Tensor) -> torch.Tensor:
    """The root mean square of every matrix of ``D`` (g, n1, n2) over the entries ``unseen``
    ((n1, n2) or (g, n1, n2)); NaN where there are none."""
    unseen = unseen.expand(D.shape)
    return (torch.where(unseen, D**2, 0.0).flatten(1).sum(dim=1) / unseen.flatten(1).sum(dim=1)).sqrt()


def _observe_two_factor(factors, data: dict, col: dict, *, model: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
    r"""The :data:`TWO_FACTOR_CURVES` (7, g) of W and its singular values. The gradient ratio is
    :math:`\beta_2\|(U, V)\|_F/\|(\nabla_U, \nabla_V)\|_F`, the weight decay's gradient against the data
    term's over all the parameters."""
    op, y, A_star, unseen = data["op"], data["y"], data["A_star"], data["unseen"]
    norm, fro = torch.linalg.vector_norm, (lambda M: torch.linalg.matrix_norm(M, ord="fro"))
    W = two_factor_product(factors, model)
    r = op(W) - y
    grads = two_factor_gradients(factors, op, y, model, data.get("M"), data.get("Y"))
    theta = torch.cat([F.flatten(1) for F in factors], dim=1)
    grad = torch.cat([g.flatten(1) for g in grads], dim=1)
    sv = _singular_values(W)
    nan = torch.full_like(sv[:, 0], math.nan)
    test = fro(W - A_star) / fro(A_star) if A_star is not None else nan
    error = _unobserved_rms(W - A_star, unseen) if unseen is not None and A_star is not None else nan
    change = _unobserved_rms(W - data["A_initial"], unseen) if unseen is not None else nan
    return torch.stack([norm(r, dim=-1) / norm(y, dim=-1), test, sv.sum(dim=-1), fro(W),
                        col["beta2"][:, 0, 0] * norm(theta, dim=-1) / norm(grad, dim=-1), error, change]), [sv]


# The iterate is the list [U, V]; W is recorded.
TWO_FACTOR = {model: Family(penalty="beta2", curves=TWO_FACTOR_CURVES, finite=FINITE, operands=("op", "y"),
                            target="A_star", evaluate=functools.partial(_observe_two_factor, model=model),
                            result=_result, unbatched={"A_star": 2, "unseen": 2, "A_initial": 2, "M": 2, "Y": 2},
                            traces=("singular_values",), view=functools.partial(two_factor_product, model=model))
              for model in TWO_FACTOR_MODELS}


def _two_factor_init(shape: tuple[int, int], model: str, config: dict[str, np.ndarray],
                     seed: int) -> list[torch.Tensor]:
    """The initial factors (G, n1, k) and (G, n2, k), k the largest width (:func:`two_factor`)."""
    n1, n2 = shape
    scale = torch.as_tensor(config["init_scale"], dtype=torch.float64)[:, None, None]
    if model == "symmetric":
        eye = torch.eye(n1, dtype=torch.float64)
        return [scale * eye, scale * eye]
    width = config["width"].astype(np.int64)
    Z = torch.as_tensor(np.random.RandomState(seed).randn(width.max(), n1 + n2))
    keep = torch.as_tensor(np.arange(width.max())[None, :] < width[:, None], dtype=torch.float64)[:, None, :]
    return [scale * keep * Z[:, :n1].T, scale * keep * Z[:, n1:].T]


@cached
def two_factor(operator, y, shape, *, model, alpha, init_scale, beta2=0.0, width=None, steps, A_star=None, seed=0,
               record_A=False, dense=1000, per_decade=100, stop_periodic=True, device="auto",
               progress=None) -> MatrixTrajectory:
    r"""Gradient descent on a two-factor model W(U, V), batched over a grid of configurations.

    ``model="asymmetric"``, Woodworth et al. (2020) §6: :math:`W = UV^\top`,
    :math:`U \in \mathbb R^{n_1\times k}`, :math:`V \in \mathbb R^{n_2\times k}`, k the ``width``, with
    i.i.d. :math:`\mathcal N(0, \zeta^2)` entries (ζ = ``init_scale``, their α), on their squared
    loss :math:`\sum_n(\langle X_n, W\rangle - y_n)^2` (a sum). Hidden unit j (the columns
    :math:`u_j, v_j`) is row j of ``RandomState(seed).randn(k_max, n1 + n2)``, scaled by ζ, for every
    configuration: the widths of a grid are nested (a configuration of width k holds the first k
    units, the others padded with zero columns, which gradient descent keeps at zero), and each ζ
    scales the same draw. The scale of the lifted model is :math:`\zeta^2k = \sigma\sqrt k` (their
    Figure 5 and Theorem 4).

    ``model="symmetric"``, Lyu et al. (2024) §3.3.3, eq. (5): :math:`W = UU^\top - VV^\top` with
    :math:`U, V \in \mathbb R^{n\times n}` from :math:`U = V = \zeta I` (so W = 0 at the start), on
    :math:`\frac1N\sum_n(\langle P_n, W\rangle - y_n)^2` (a mean; their :math:`P_n = e_ie_i^\top` is a
    misprint for the :math:`e_ie_j^\top` of Appendix F, symmetrised there: the same loss, as W is
    symmetric). ``width`` must be None and ``shape`` square.

    Both add the weight decay :math:`\frac{\beta_2}2(\|U\|_F^2 + \|V\|_F^2)` (``beta2`` is Lyu et al.'s λ;
    Woodworth et al. have none) and update both factors at once with the step ``alpha``
    (:func:`two_factor_step`). ``alpha``, ``init_scale``, ``beta2`` and ``width`` are scalars or (G,)
    grids of one length (:func:`grokkit.kernels.grid`), all run in one batched computation.

    ``operator``, ``y``, ``shape``, ``A_star``: as :func:`subgradient` (a completion mask, shared or
    one per configuration, or a sensing X: Theorem 4's diagonal measurements are a sensing X whose
    rows read :math:`\operatorname{diag}(W)`). No step-size bound is checked (it depends on the
    factors' scale): a configuration that diverges is stopped and reported (``RuntimeWarning``).
    ``record_A`` keeps the iterates W; ``dense``, ``per_decade``, ``stop_periodic``, ``device``,
    ``progress``: as for the other kernels.

    Returns a :class:`MatrixTrajectory` of W (``depth`` 2) with the curves of :func:`subgradient`
    (``grad_ratio`` is :math:`\beta_2\|(U, V)\|_F/\|(\nabla_U, \nabla_V)\|_F`) and, for completion,
    ``unobserved_error`` and ``unobserved_change``, the root mean squares of :math:`W - A^*` and of
    :math:`W - W^{(1)}` over the unobserved entries (off the mask; for ``"symmetric"``, off the mask
    and its transpose, which a symmetric W fits together); its ``config`` holds ``width`` for the
    asymmetric model. Raises ``ValueError`` before any compute for a bad input."""
    model = check_option("model", model, TWO_FACTOR_MODELS)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    check_int("dense", dense, 0)
    check_int("per_decade", per_decade, 1)
    device = resolve_device(device)
    seed = check_seed("seed", seed)
    n1, n2 = _shape(shape)
    check_grid("init_scale", init_scale, 0.0, closed="neither")
    if model == "symmetric":
        if width is not None:
            raise ValueError(f"width must be None for model 'symmetric' (U and V are n x n), got {show(width)}")
        if n1 != n2:
            raise ValueError(f"shape must be square (n, n) for model 'symmetric', got {show(shape)}")
        hyper = {}
    else:
        widths = np.atleast_1d(np.asarray(width, dtype=object))
        if width is None or widths.ndim != 1 or widths.size == 0:
            raise ValueError(f"width must be an integer >= 1 or a non-empty grid of them for model 'asymmetric', "
                             f"got {show(width)}")
        hyper = {"width": np.array([check_int("width", k, 1) for k in widths], dtype=float)}
    config = configurations(alpha=alpha, beta2=beta2, init_scale=init_scale, **hyper)
    data, config = _problem(operator, y, (n1, n2), A_star, config, device)
    op = data["op"]
    factors = [F.to(device) for F in _two_factor_init((n1, n2), model, config, seed)]
    G, k = factors[0].shape[0], factors[0].shape[-1]
    if op.kind == "completion":
        seen = op.mask | op.mask.mT if model == "symmetric" else op.mask
        data.update(unseen=~seen, M=op.mask.to(torch.float64), Y=op.adjoint(data["y"].expand(G, op.N)))
    else:
        data.update(unseen=None, M=None, Y=None)
    data["A_initial"] = two_factor_product(factors, model)
    work = G * n1 * n2 * (3 * k + (op.N if op.kind == "sensing" else 2))  # three products a step
    traj = run(TWO_FACTOR[model], f"two_factor_{model}", functools.partial(two_factor_step, model=model), data,
               config, factors, steps, work=work, record=record_A, dense=dense, per_decade=per_decade,
               stop_periodic=stop_periodic, progress=progress)
    traj.depth = 2
    return traj
