r"""Update rules for matrix factorization (paper §2 and Appendix D), batched over configurations.

The objective is, for a linear measurement operator :math:`\mathcal X`,

.. math:: f(A) = \tfrac12\|\mathcal X(A) - y^*\|_2^2 + \tfrac{\beta_2}{2}\|A\|_F^2 + \beta_*\|A\|_*,

with :math:`h(A) = UV^\top` (thin SVD :math:`A = U\Sigma V^\top`) a subgradient of
:math:`\|A\|_*` (eq. 101). Iterates have shape (G, n1, n2), hyper-parameters (G, 1, 1).
:class:`Measurements` is :math:`\mathcal X`: matrix completion reads the entries of a mask
(never an N × n1n2 matrix), matrix sensing applies a dense (N, n1n2) matrix to the
column-major :math:`\operatorname{vec} A`.

The deep factorization :math:`A = \mathcal A_1\cdots\mathcal A_L` (§D.11, eqs. 128–130) keeps its
factors as a list of (G, d_{k-1}, d_k) tensors (:func:`deep_init`, :func:`deep_step`).

These are the steps; the loop that runs them (schedule, records, early stop, divergence) is
:func:`grokkit.kernels.run.run`'s, to be generalised to matrices (issue 8).
"""
from __future__ import annotations

import numpy as np
import torch

from grokkit._checks import check_int, check_option, check_range, check_seed, show

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

    def __call__(self, A: torch.Tensor) -> torch.Tensor:
        r""":math:`\mathcal X(A)` for every matrix of ``A`` (G, n1, n2): shape (G, N)."""
        G = A.shape[0]
        if self.kind == "completion":
            return torch.gather(A.reshape(G, -1), 1, self.index.expand(G, -1))
        vec = A.mT.reshape(G, -1)
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


def projected_subgradient_step(A, op, y, alpha, beta_star, beta2, project):
    r"""Projected subgradient descent on :math:`\{A : \mathcal X(A) = y^*\}`:
    :math:`A \leftarrow \Pi(A - \alpha(\beta_2 A + \beta_* h(A)))`, ``project`` the affine projection."""
    direction = beta_star * nuclear_subgradient(A)
    if beta2 is not None:
        direction = direction + beta2 * A
    return project(A - alpha * direction)


def factor_gradients(factors, grad):
    r"""Lemma D.14 without input checks (the kernels' inner loop; :func:`grokkit.theory.deep_gradients`
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
    + \beta_*\sum_k\|\mathcal A_k\|_*` (spec §3.7: the authors' code is right only for L = 2, β₂ = 0)."""
    grads = factor_gradients(factors, data_gradient(product(factors), op, y, None))
    out = []
    for F, grad in zip(factors, grads):
        update = grad + beta_star * nuclear_subgradient(F)
        if beta2 is not None:
            update = update + beta2 * F
        out.append(F - alpha * update)
    return out


def affine_projection(op: Measurements, y: torch.Tensor):
    r"""The projection onto :math:`\{A : \mathcal X(A) = y\}`. Completion: set the observed
    entries to ``y``. Sensing: :math:`A - \mathcal X^*((XX^\top)^{-1}(\mathcal X(A) - y))`."""
    if op.kind == "completion":
        def project(A: torch.Tensor) -> torch.Tensor:
            G = A.shape[0]
            flat = A.reshape(G, -1).clone()
            flat.scatter_(1, op.index.expand(G, -1), y.expand(G, -1))
            return flat.reshape(A.shape)
        return project
    gram_inv = torch.linalg.inv(op.X @ op.X.mT)

    def project(A: torch.Tensor) -> torch.Tensor:
        r = op(A) - y
        correction = r @ gram_inv.mT if gram_inv.dim() == 2 else torch.bmm(gram_inv, r.unsqueeze(-1)).squeeze(-1)
        return A - op.adjoint(correction)
    return project
