r"""Sparse-recovery kernels (paper §2, Appendix C.6–C.8), batched over configurations.

All three minimise, or follow the subgradient flow of,

.. math:: f(b) = \tfrac12\|\tilde Xb - y^*\|_2^2 + \tfrac{\beta_2}{2}\|b\|_2^2 + \beta_1\|b\|_1,

with :math:`G_{\beta_2}(b) = \tilde X^\top(\tilde Xb - y^*) + \beta_2 b` and
:math:`h(b) = \operatorname{sign}(b) \in \partial\|b\|_1` (sign(0) = 0).
They share one signature: ``method(X, y, *, alpha, beta1, beta2, steps, ...)``, where
each hyper-parameter is a scalar or a (G,) grid (see :func:`grokkit.kernels.grid`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from grokkit._checks import check_finite, check_int, check_option, check_range, check_real, check_seed, show
from grokkit.cache import cached
from grokkit.kernels import fused, persistent
from grokkit.kernels.run import (FINITE, MAX_STEPS, METRICS, SPARSE, Family, Trajectory, _metrics, _sparse_result,
                                 apply, apply_t, check_step_size, compiled, configurations, gradient, lambda_max,
                                 residual, resolve_device, run)

INITS = ("random", "constant")


def subgradient_step(b, X, y, alpha, beta1, beta2):
    r"""Eq. (22): :math:`b \leftarrow b - \alpha\,(G_{\beta_2}(b) + \beta_1 h(b))`, with
    :math:`G_{\beta_2}(b) = \tilde X^\top(\tilde Xb - y^*) + \beta_2 b` (``beta2=None`` means 0)."""
    h = beta1 * torch.sign(b) if beta2 is None else beta1 * torch.sign(b) + beta2 * b
    return torch.addcmul(b, alpha, gradient(X, residual(X, b, y), h), value=-1)


def projected_subgradient_step(b, X, y, alpha, beta1, beta2, P):
    r"""§C.7: :math:`b \leftarrow \Pi(b - \alpha(\beta_2 b + \beta_1 h(b)))` with the projection
    :math:`\Pi(c) = c - \tilde X^\dagger(\tilde Xc - y^*)` onto :math:`\{\tilde Xb = y^*\}`, ``P`` = :math:`\tilde X^\dagger`.

    The authors' code also subtracts :math:`\alpha\tilde X^\top(\tilde Xb-y^*)` before projecting;
    that term lies in the row space of :math:`\tilde X`, which :math:`\Pi` removes, so both
    rules give the same iterates."""
    h = beta1 * torch.sign(b) if beta2 is None else beta1 * torch.sign(b) + beta2 * b
    c = torch.addcmul(b, alpha, h, value=-1)
    return c - apply(P, residual(X, c, y))


def soft_threshold(z: torch.Tensor, gamma) -> torch.Tensor:
    r""":math:`S_\gamma(z) = \operatorname{sign}(z)\max(|z| - \gamma, 0) = z - \operatorname{clip}(z, -\gamma, \gamma)`,
    the prox of :math:`\gamma\|\cdot\|_1`."""
    gamma = torch.as_tensor(gamma, dtype=z.dtype, device=z.device)
    return z - torch.clamp(z, -gamma, gamma)


def ista_step(b, X, y, alpha, beta1, beta2):
    r"""Eq. (86): :math:`b \leftarrow S_{\alpha\beta_1}(b - \alpha G_{\beta_2}(b))` (``beta2=None`` means 0)."""
    G = gradient(X, residual(X, b, y), torch.zeros_like(b) if beta2 is None else beta2 * b)
    return soft_threshold(torch.addcmul(b, alpha, G, value=-1), alpha * beta1)


def _leading(value, ndim: int) -> int:
    """Size of the configuration axis of ``value`` (1 when it has only its ``ndim`` own axes)."""
    shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
    return shape[0] if len(shape) == ndim + 1 else 1


def _tensor(name: str, value, own: str, G: int) -> torch.Tensor:
    """``value`` as float64, shaped ``own`` (shared) or (G, ``own``) (one per configuration)."""
    ndim = own.count(",") + (0 if own.endswith(",)") else 1)
    check_real(name, value)
    t = torch.as_tensor(value if torch.is_tensor(value) else np.asarray(value), dtype=torch.float64)
    if t.dim() == ndim + 1 and t.shape[0] == 1:
        t = t[0]
    if t.dim() not in (ndim, ndim + 1) or (t.dim() == ndim + 1 and t.shape[0] != G):
        batched = "(G, " + own[1:].replace(",)", ")")
        raise ValueError(f"{name} must have shape {own} or {batched} with G = {G} configurations, "
                         f"got {tuple(t.shape)}")
    return t


def _nonzero(name: str, t: torch.Tensor, norm: str) -> None:
    """Raise if a row of ``t`` is all zeros: the relative error divides by its norm."""
    zero = torch.nonzero(~t.reshape(-1, t.shape[-1]).any(dim=-1)).flatten()
    if zero.numel():
        where = f" (configuration {zero[0].item()})" if t.dim() > 1 else ""
        raise ValueError(f"{name} must be nonzero: the relative {norm} error divides by its norm, "
                         f"got all zeros{where}")


def _direction(n: int, init: str, seed: int, layers: int | None = None) -> torch.Tensor:
    r""":math:`\tilde b` of :math:`b^{(1)} = \zeta\tilde b`: :math:`\mathcal N(0, I_n/n)` from ``seed``, or :math:`\mathbf 1`.
    With ``layers``, that many (layers, n) drawn one after the other from the same stream, the
    first being the one-layer :math:`\tilde b` (the factors of :func:`deep`)."""
    if init != "random":
        return torch.ones(n, dtype=torch.float64) if layers is None else torch.ones(layers, n, dtype=torch.float64)
    stream = torch.Generator().manual_seed(seed)
    draws = [torch.randn(n, generator=stream, dtype=torch.float64) / n ** 0.5 for _ in range(layers or 1)]
    return draws[0] if layers is None else torch.stack(draws)


def _inits(init) -> list[str]:
    """``init`` as a list of options: one (shared) or one per configuration, each checked."""
    inits = list(init) if isinstance(init, (list, tuple, np.ndarray)) else [init]
    if not inits:
        raise ValueError("init must be one option or a non-empty sequence of options, got []")
    for option in inits:
        check_option("init", option, INITS)
    return inits


def initial_point(n: int, init_scale: float = 1e-6, init: str = "random", seed: int = 0) -> np.ndarray:
    r"""The initial iterate :math:`b^{(1)} = \zeta\tilde b` (n,) that the kernels start from with the
    same ``init_scale``, ``init`` and ``seed`` (see their ``init``): the :math:`b^{(1)}` of the bounds
    of Lemma C.7 and Theorem C.8. ``n >= 1``, ``init_scale >= 0``, ``init`` and ``seed`` checked."""
    n = check_int("n", n, 1)
    init_scale = check_range("init_scale", init_scale, 0.0, closed="left")
    check_option("init", init, INITS)
    return init_scale * _direction(n, init, check_seed("seed", seed)).numpy()


def _prepare(X, y, b_star, alpha, beta1, beta2, init_scale, alpha_decay, init, seed, device):
    """Validate every argument and move the problem to ``device``; nothing is computed before this."""
    device = resolve_device(device)
    inits = _inits(init)
    seed = check_seed("seed", seed)
    config = configurations(alpha=alpha, beta1=beta1, beta2=beta2, init_scale=init_scale,
                            **({} if alpha_decay is None else {"alpha_decay": alpha_decay}))
    G = config["alpha"].size
    if G == 1:
        G = max(_leading(X, 2), _leading(y, 1), _leading(b_star, 1) if b_star is not None else 1,
                len(inits))
    if len(inits) not in (1, G):
        raise ValueError(f"init must be one option or a sequence of one per configuration (G = {G}), "
                         f"got {len(inits)} options")
    if config["alpha"].size == 1:
        config = {k: np.repeat(v, G) for k, v in config.items()}
    X, y, b_star = _problem(X, y, b_star, G)
    n = X.shape[-1]
    _nonzero("y", y, "training")
    check_step_size(config, lambda_max(X))
    direction = torch.stack([_direction(n, option, seed) for option in inits])
    b0 = torch.as_tensor(config["init_scale"], dtype=torch.float64)[:, None] * direction
    return X.to(device), y.to(device), None if b_star is None else b_star.to(device), config, b0.to(device)


def _problem(X, y, b_star, G: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``X`` (N, n), ``y`` (N,) and ``b_star`` (n,) or None as float64 tensors, each shared or one per
    configuration of G, checked: shapes that agree, finite values, ``b_star`` nonzero."""
    X, y = _tensor("X", X, "(N, n)", G), _tensor("y", y, "(N,)", G)
    N, n = X.shape[-2:]
    if N < 1 or n < 1:
        raise ValueError(f"X must have N >= 1 rows and n >= 1 columns, got shape {tuple(X.shape)}")
    if y.shape[-1] != N:
        raise ValueError(f"y must have shape (N,) or (G, N) with N = {N} (the rows of X), got {tuple(y.shape)}")
    check_finite("X", X)
    check_finite("y", y)
    if b_star is not None:
        b_star = _tensor("b_star", b_star, "(n,)", G)
        if b_star.shape[-1] != n:
            raise ValueError(f"b_star must have shape (n,) or (G, n) with n = {n} (the columns of X), "
                             f"got {tuple(b_star.shape)}")
        check_finite("b_star", b_star)
        _nonzero("b_star", b_star, "recovery")
    return X, y, b_star


def _doc(method: str, rule: str) -> str:
    return rf"""{rule}

    Parameters
    ----------
    X : (N, n) or (G, N, n) array
        Effective design :math:`\tilde X = X\Phi`, shared or one per configuration; finite, N, n >= 1.
    y : (N,) or (G, N) array
        Measurements :math:`y^*`; finite and nonzero (the training error is relative to :math:`\|y^*\|_2`).
    alpha : float or (G,) array
        Step size, :math:`0 < \alpha < 2/(\lambda_\max(\tilde X^\top\tilde X) + \beta_2)` (checked).
    beta1, beta2 : float or (G,) array
        :math:`\ell_1` and (squared) :math:`\ell_2` coefficients, :math:`\ge 0`.
    steps : int
        Number of updates, at most :data:`grokkit.kernels.run.MAX_STEPS` (1e15).
    b_star : (n,) or (G, n) array, optional
        Ground truth, for the recovery error :math:`\|b - b^*\|_2/\|b^*\|_2`: finite and
        nonzero (an all-zero row is refused, its relative error would be infinite).
    init_scale : float or (G,) array
        :math:`\zeta`: :math:`b^{{(1)}} = \zeta\,\tilde b`.
    alpha_decay : None, float or (G,) array
        b of the decaying step :math:`\alpha_t = \alpha(1+b)/(b+t)` at update t = 1, 2, …
        (:func:`grokkit.kernels.run.step_size`: :math:`\alpha_1 = \alpha`, square-summable but not
        summable, Corollary C.1), in [0, inf]; None or inf is the constant step α. The stability
        check applies to :math:`\alpha = \max_t\alpha_t`; such runs use the PyTorch steps, and the
        trajectory's ``config`` then holds ``alpha_decay``.
    init : {{"random", "constant"}} or a sequence of G of them (one per configuration)
        :math:`\tilde b \sim \mathcal N(0, I_n/n)` drawn from ``seed`` (paper, §C.6) or
        :math:`\tilde b = \mathbf 1` (the authors' code); a sequence runs both
        initialisations in one batch (Figure 25).
    seed : int
        Seed of the random initialisation, in [0, 2**32 - 1].
    record_b : bool
        Keep the iterates at every recorded step (``Trajectory.b``).
    dense, per_decade : int
        Logging schedule (:func:`grokkit.kernels.log_schedule`).
    stop_periodic : bool
        Stop configurations whose iterates repeat exactly (period 1 or 2) and fill their
        remaining records from the cycle; the numbers equal a full run's up to rounding (~1e-16).
    device : {{"auto", "cpu", "cuda", "cuda:K"}} or torch.device
    progress : bool or None
        Progress bar; ``None`` shows it only on a terminal.

    Returns
    -------
    Trajectory
        Curves of shape (G, T) on the logging schedule, method ``"{method}"``.

    Raises
    ------
    ValueError
        Before any compute, for a bad shape, a non-finite or zero input, an empty grid, a
        hyper-parameter out of range, or :math:`\alpha` above the stability limit.

    Warns
    -----
    RuntimeWarning
        Naming by index the configurations that diverged (see :class:`~grokkit.kernels.Trajectory`).
    """


def _projector(X: torch.Tensor) -> dict[str, torch.Tensor]:
    r""":math:`P = \tilde X^\dagger` for the projected method, which needs :math:`\{\tilde Xb = y^*\}` nonempty."""
    n = X.shape[-1]
    rows = X.ne(0).any(dim=-1).sum(dim=-1)  # the rows that measure (zero rows pad a stack of problems)
    rank = torch.linalg.matrix_rank(X)
    bad = torch.nonzero(rank < rows).flatten()
    if bad.numel() or rows.max().item() > n:
        g = bad[0].item() if bad.numel() else int(rows.argmax())
        where = f" (configuration {g})" if X.dim() == 3 else ""
        N, r = (rows.reshape(-1)[g].item(), rank.reshape(-1)[g].item())
        raise ValueError(f"projected_subgradient needs rank(X) = N <= n so that {{Xb = y}} is a "
                         f"nonempty affine set, got N = {N}, n = {n}, rank {r}{where}")
    return {"P": torch.linalg.pinv(X)}


def _kernel(method: str, step, rule: str, extra=None):
    """The public function of one update rule; ``extra(X)`` gives the step's additional tensors."""
    def kernel(X, y, *, alpha, beta1, beta2=0.0, steps, b_star=None, init_scale=1e-6, alpha_decay=None,
               init="random", seed=0, record_b=False, dense=1000, per_decade=100, stop_periodic=True, device="auto",
               progress=None) -> Trajectory:
        steps = check_int("steps", steps, 1, MAX_STEPS)
        check_int("dense", dense, 0)
        check_int("per_decade", per_decade, 1)
        X, y, b_star, config, b0 = _prepare(X, y, b_star, alpha, beta1, beta2, init_scale, alpha_decay, init,
                                            seed, device)
        data = {"X": X, "y": y, "b_star": b_star, **(extra(X) if extra else {})}
        return run(SPARSE, method, step, data, config, b0, steps, work=b0.shape[0] * X.shape[-2] * X.shape[-1],
                   record=record_b, dense=dense, per_decade=per_decade, stop_periodic=stop_periodic,
                   progress=progress)

    kernel.__name__ = kernel.__qualname__ = method
    kernel.__doc__ = _doc(method, rule)
    return cached(kernel)


subgradient = _kernel(
    "subgradient", subgradient_step,
    r"""Subgradient descent, eq. (22): :math:`b^{(t+1)} = b^{(t)} - \alpha(G_{\beta_2}(b^{(t)}) + \beta_1 h(b^{(t)}))`.""")
projected_subgradient = _kernel(
    "projected_subgradient", projected_subgradient_step,
    r"""Projected subgradient, §C.7: :math:`b^{(t+1)} = \Pi(b^{(t)} - \alpha(\beta_2 b^{(t)} + \beta_1 h(b^{(t)})))`,
    :math:`\Pi` the projection onto :math:`\{\tilde Xb = y^*\}` (needs rank :math:`\tilde X` = N <= n).
    The iterates fit the data exactly, so the recorded gradient ratio divides by rounding noise.""",
    extra=_projector)
ista = _kernel(
    "ista", ista_step,
    r"""Proximal gradient (ISTA), eq. (86): :math:`b^{(t+1)} = S_{\alpha\beta_1}(b^{(t)} - \alpha G_{\beta_2}(b^{(t)}))`.""")

METHODS = {"subgradient": subgradient, "projected_subgradient": projected_subgradient, "ista": ista}


def solve(method: str, X, y, **kwargs) -> Trajectory:
    """Run the kernel named ``method`` (``"subgradient"``, ``"projected_subgradient"`` or ``"ista"``)."""
    check_option("method", method, tuple(METHODS))
    return METHODS[method](X, y, **kwargs)


# ----------------------------------------------------------------------------- deep diagonal network

def diagonal_product(B: torch.Tensor) -> torch.Tensor:
    r""":math:`b = B_1 \odot \cdots \odot B_L` (§C.11) for every configuration of the stacked
    factors ``B`` (G, L, n), multiplied in the order of the layers (as :func:`deep_step` does)."""
    return torch.cumprod(B, dim=1)[:, -1]


def _factor_terms(B: torch.Tensor, X: torch.Tensor, y: torch.Tensor):
    r"""The product :math:`b`, the residual :math:`\tilde Xb - y^*` and the factors' data gradients
    :math:`\tilde X^\top(\tilde Xb - y^*) \odot \prod_{j \ne k} B_j` (G, L, n).

    Lemma D.14 for diagonal factors: they commute and are their own transposes, so the products
    before and after layer k are two cumulative products along the layer axis (one operation
    each, whatever L), never a division by :math:`B_k` (which may vanish)."""
    ones = torch.ones_like(B[:, :1])
    before = torch.cumprod(torch.cat([ones, B[:, :-1]], dim=1), dim=1)  # prod_{j<k} B_j
    after = torch.cumprod(torch.cat([ones, B[:, 1:].flip(1)], dim=1), dim=1).flip(1)  # prod_{j>k} B_j
    b = before[:, -1] * B[:, -1]
    r = residual(X, b, y)
    g = gradient(X, r, torch.zeros_like(b))
    return b, r, g[:, None] * (before * after)


def deep_step(B, X, y, alpha, beta1, beta2, active):
    r"""One update of the deep diagonal network (§C.11, eq. 88), every factor from the old iterate:
    :math:`B_k \leftarrow B_k - \alpha(\tilde X^\top(\tilde Xb - y^*) \odot \prod_{j\ne k}B_j + \beta_2B_k
    + \beta_1\operatorname{sign}(B_k))`, :math:`b = \odot_k B_k`, the subgradient step of
    :math:`\tfrac12\|\tilde Xb - y^*\|^2 + \tfrac{\beta_2}2\sum_k\|B_k\|_2^2 + \beta_1\sum_k\|B_k\|_1`.

    ``B`` (G, L, n) stacks the factors; ``active`` (G, L, 1) is 1 for the layers of a configuration
    and 0 for the padding of a shallower one (factors of ones that never move: multiplying by
    1.0 is exact, so a padded configuration follows its own depth's iterates bit for bit).
    ``alpha``, ``beta1``, ``beta2`` are columns (G, 1) (those of the recorded product, :class:`Family`);
    ``beta2=None`` means 0."""
    _, _, grads = _factor_terms(B, X, y)
    beta1 = beta1[:, :, None]
    update = (torch.addcmul(grads, beta1, torch.sign(B)) if beta2 is None
              else grads + beta1 * torch.sign(B) + beta2[:, :, None] * B)
    return torch.addcmul(B, alpha[:, :, None] * active, update, value=-1)


def _observe_deep(B: torch.Tensor, data: dict, col: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    r"""The :data:`~grokkit.kernels.run.METRICS` (5, g) of the product b; the gradient ratio over
    all the factors' parameters, :math:`\|\beta_1(h(B_1), \dots, h(B_L))\|_2/\|(G_{\beta_2}(B_1),
    \dots, G_{\beta_2}(B_L))\|_2`, :math:`G_{\beta_2}(B_k)` the factor's gradient (as
    :data:`grokkit.kernels.matrix.DEEP`; NaN at an exact fit with :math:`\beta_2 = 0`)."""
    norm, active = torch.linalg.vector_norm, data["active"]
    b, _, grads = _factor_terms(B, data["X"], data["y"])
    values, _ = _metrics(b, data, col)
    G = (grads + col["beta2"][:, :, None] * B) * active
    h_norm = col["beta1"][:, 0] * torch.count_nonzero(B * active, dim=(1, 2)).to(B.dtype).sqrt()
    values[4] = h_norm / norm(G.flatten(1), dim=-1)
    return values, []


# The deep diagonal network: the iterate is the stacked factors (G, L, n), the product b is recorded.
SPARSE_DEEP = Family(penalty="beta1", curves=METRICS, finite=FINITE, operands=("X", "y"), target="b_star",
                     evaluate=_observe_deep, result=_sparse_result, unbatched={"X": 2, "active": 2},
                     view=diagonal_product, fused=compiled(fused.deep_steps, persistent.deep_steps))


def deep_factors(n: int, depth, init_scale=1e-2, *, init: str = "random", seed: int = 0) -> np.ndarray:
    r"""The initial factors of :func:`deep`, (G, L_max, n), L_max the largest depth: configuration g
    has :math:`B_k^{(1)} = \zeta_g\tilde B_k` for its ``depth[g]`` layers and ones after them.

    ``"random"``: :math:`\tilde B_k \sim \mathcal N(0, I_n/n)` i.i.d. (the paper, §C.11), drawn one
    after the other from ``seed`` (:math:`\tilde B_1` is the :math:`\tilde b` of the shallow kernels,
    so L = 1 starts where :func:`subgradient` does); ``"constant"``: :math:`\tilde B_k = \mathbf 1`
    (the authors' code, the diagonal of their identity initialisation), so every factor equals
    :math:`\zeta\mathbf 1` and, with :math:`\beta_1 = \beta_2 = 0`, they stay equal forever:
    :math:`b = u^{\odot L}` is never negative for an even L. ``depth`` and
    ``init_scale`` are scalars or (G,) grids of one length; ``n``, ``depth`` >= 1,
    ``init_scale`` >= 0, ``init``, ``seed`` checked."""
    n = check_int("n", n, 1)
    depth = _depths(depth)
    check_option("init", init, INITS)
    seed = check_seed("seed", seed)
    config = configurations(init_scale=init_scale, depth=depth.astype(float))
    return _initial_factors(n, config, init, seed).numpy()


def _depths(depth) -> np.ndarray:
    """``depth`` (a number or a grid) as an int array, each an integer >= 1."""
    values = np.atleast_1d(np.asarray(depth, dtype=object))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"depth must be an integer >= 1 or a non-empty 1-D grid of them, got {show(depth)}")
    return np.array([check_int("depth", v, 1) for v in values])


def _initial_factors(n: int, config: dict, init: str, seed: int) -> torch.Tensor:
    depth = config["depth"].astype(int)
    B = _direction(n, init, seed, int(depth.max())).expand(depth.size, -1, -1).clone()
    layers = torch.arange(B.shape[1])[None, :, None]
    scale = torch.as_tensor(config["init_scale"], dtype=torch.float64)[:, None, None]
    return torch.where(layers < torch.as_tensor(depth)[:, None, None], scale * B, 1.0)


@cached
def deep(X, y, *, depth, alpha, beta1=0.0, beta2=0.0, steps, b_star=None, init_scale=1e-2, alpha_decay=None,
         init="random", seed=0, record_b=False, dense=1000, per_decade=100, stop_periodic=True, device="auto",
         progress=None) -> Trajectory:
    r"""Subgradient descent on the deep diagonal network :math:`b = B_1\odot\cdots\odot B_L` (§C.11,
    eqs. 87–88, :func:`deep_step`): every factor updated at once from the old iterate, for
    :math:`\tfrac12\|\tilde Xb - y^*\|^2 + \tfrac{\beta_2}2\sum_k\|B_k\|_2^2 + \beta_1\sum_k\|B_k\|_1`.

    ``depth`` = L is a number or a (G,) grid of integers >= 1, like the other hyper-parameters:
    configurations of different depths run in one batch, their factors stacked (G, L_max, n)
    with factors of ones, never updated, after the last layer of a shallower one (exact: its
    iterates are those of a run at its own depth). L = 1 is :func:`subgradient`, step for step.
    The initial factors are :func:`deep_factors` (``init`` "random", the paper's
    :math:`\zeta\mathcal N(0, I_n/n)`, or "constant", the authors' :math:`\zeta\mathbf 1`).
    ``X``, ``y``, ``b_star`` (one problem or one per configuration, e.g.
    :func:`grokkit.data.sparse.stack_problems`), ``alpha``, ``beta1``, ``beta2``, ``init_scale``,
    ``alpha_decay`` and the loop controls are those of :func:`subgradient`, with the same
    checks; the shallow bound :math:`\alpha < 2/(\lambda_\max + \beta_2)` is checked too, though
    a deeper model can need a smaller α (configurations that diverge are stopped and reported,
    ``RuntimeWarning``).

    Returns a :class:`~grokkit.kernels.Trajectory` of the product b (curves, ``b``,
    ``b_final``), ``config["depth"]`` the depths, with the gradient ratio over all the factors'
    parameters. Raises ``ValueError`` before any compute for a bad input (``depth`` first)."""
    depth = _depths(depth)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    check_int("dense", dense, 0)
    check_int("per_decade", per_decade, 1)
    if depth.size > 1 and np.size(alpha) == 1:  # a grid of depths sets G, as any grid does
        alpha = np.full(depth.size, float(check_range("alpha", alpha, 0.0, closed="neither")))
    X, y, b_star, config, _ = _prepare(X, y, b_star, alpha, beta1, beta2, init_scale, alpha_decay, init, seed, device)
    G = config["alpha"].size
    if depth.size not in (1, G):
        raise ValueError(f"depth must be a number or one per configuration (G = {G}), got {depth.size} values")
    config["depth"] = np.broadcast_to(depth, (G,)).copy()
    B0 = _initial_factors(X.shape[-1], config, init, seed).to(X.device)
    active = (torch.arange(B0.shape[1], device=X.device)[None, :, None]
              < torch.as_tensor(config["depth"], device=X.device)[:, None, None]).to(torch.float64)
    data = {"X": X, "y": y, "b_star": b_star, "active": active}
    return run(SPARSE_DEEP, "deep", deep_step, data, config, B0, steps,
               work=G * X.shape[-2] * X.shape[-1], record=record_b, dense=dense, per_decade=per_decade,
               stop_periodic=stop_periodic, progress=progress)


# ----------------------------------------------------------------------------- the u^D − v^D network ([W], [L])

LOSSES = ("square", "logistic")


def signed_powers(W: torch.Tensor, depth) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`\beta = w_+^{\odot D} - w_-^{\odot D}` ([W] eq. 10, [L] eq. 4) and the powers
    :math:`w_\pm^{\odot(D-1)}` (G, 2, n), for the stacked branches ``W`` (G, 2, n) and the depths
    ``depth``: an integer shared by every configuration, or a column (G, 1). The derivatives of β
    in :math:`w_\pm` are :math:`\pm Dw_\pm^{\odot(D-1)}`."""
    if isinstance(depth, int):
        powers = W if depth == 2 else W ** (depth - 1)
    else:
        powers = W ** (depth[:, :, None] - 1)
    beta = W[:, 0] * powers[:, 0] - W[:, 1] * powers[:, 1]
    return beta, powers


def _loss_gradient(loss: str, X: torch.Tensor, y: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    r"""The gradient in β of the data term: :math:`\tilde X^\top(\tilde X\beta - y)` for ``"square"``
    (:math:`\tfrac12\|\tilde X\beta - y\|^2`), :math:`-\tfrac1N\tilde X^\top(y \odot \sigma(-y \odot \tilde X\beta))`
    for ``"logistic"`` (:math:`\tfrac1N\sum_i\log(1 + e^{-y_i\langle\beta, x_i\rangle})`)."""
    if loss == "square":
        return apply_t(X, residual(X, beta, y))
    return apply_t(X, torch.sigmoid(apply(X, beta).mul_(y).neg_()).mul_(y).mul_(-1 / X.shape[-2]))


def _branch_gradient(loss: str, X, y, W, depth) -> tuple[torch.Tensor, torch.Tensor]:
    r"""β and the loss's gradient in the branches, :math:`(Dw_+^{D-1}, -Dw_-^{D-1}) \odot \nabla_\beta\ell`."""
    beta, powers = signed_powers(W, depth)
    g = _loss_gradient(loss, X, y, beta) * (depth if isinstance(depth, int) else depth)
    return beta, powers * torch.stack([g, -g], dim=1)


def _diagonal_net_step(loss: str, depth: int | None, l1: bool):
    """The step of :func:`diagonal_net`; ``depth`` when every configuration has that depth (the
    exponent is then a Python integer), ``l1`` False when every ``beta1`` is 0 (its term is skipped)."""
    def step(x, X, y, alpha, beta1, beta2, **observed):
        r"""One gradient step on both branches of ``x = [W, depth]``: :math:`w_\pm \leftarrow w_\pm -
        \alpha(\pm Dw_\pm^{D-1} \odot \nabla_\beta\ell(\beta) + \beta_1\operatorname{sign}(w_\pm) + \beta_2 w_\pm)`
        (``beta2=None`` means 0; what is only observed, passed with the data, is not used: the test
        set, the directions)."""
        W, depths = x
        _, update = _branch_gradient(loss, X, y, W, depths if depth is None else depth)
        if l1:
            update = torch.addcmul(update, beta1[:, :, None], torch.sign(W))
        if beta2 is not None:
            update = torch.addcmul(update, beta2[:, :, None], W)
        return [torch.addcmul(W, alpha[:, :, None], update, value=-1), depths]
    step.__name__ = f"diagonal_net_{loss}_step"
    return step


def _observe_diagonal_net(loss: str):
    def evaluate(x, data: dict, col: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
        r"""The :data:`~grokkit.kernels.run.METRICS` (5, g) of β (:func:`diagonal_net`)."""
        norm = torch.linalg.vector_norm
        (W, depth), X, y, b_star = x, data["X"], data["y"], data["b_star"]
        X_test, y_test = data.get("X_test"), data.get("y_test")
        beta, data_grad = _branch_gradient(loss, X, y, W, depth)
        nan = torch.full_like(beta[:, 0], torch.nan)
        if loss == "square":
            train = norm(residual(X, beta, y), dim=-1) / norm(y, dim=-1)
            if b_star is not None:
                test = norm(beta - b_star, dim=-1) / norm(b_star, dim=-1)
            else:
                test = nan if X_test is None else norm(residual(X_test, beta, y_test), dim=-1) / norm(y_test, dim=-1)
        else:
            train = (y * apply(X, beta) <= 0).to(beta.dtype).mean(dim=-1)
            test = nan if X_test is None else (y_test * apply(X_test, beta) <= 0).to(beta.dtype).mean(dim=-1)
        penalty = col["beta1"][:, :, None] * torch.sign(W) + col["beta2"][:, :, None] * W
        ratio = norm(penalty.flatten(1), dim=-1) / norm(data_grad.flatten(1), dim=-1)
        directions = data.get("directions")
        projections = [] if directions is None else [(directions @ beta[..., None])[..., 0]]   # ⟨β, d_k⟩ (g, k)
        return torch.stack([train, test, norm(beta, 1, dim=-1), norm(beta, dim=-1), ratio]), projections
    return evaluate


@dataclass
class DiagonalNetTrajectory(Trajectory):
    r"""A :class:`~grokkit.kernels.Trajectory` of :func:`diagonal_net`, with ``projections`` (G, T, k):
    :math:`\langle\beta, d_k\rangle` at every record for the ``directions`` :math:`d_k` of the call
    (None without). With the recorded :math:`\|\beta\|_2` (``l2``) they give the angle of β to each
    direction without keeping the iterates (``b``), which at a large n do not fit in a checkpoint."""

    projections: np.ndarray | None = None


def _diagonal_net_result(*, curves, iterates, final, traces, **fields) -> DiagonalNetTrajectory:
    return DiagonalNetTrajectory(**fields, **curves, b=iterates, b_final=final, projections=traces.get("projections"))


# The iterate is [W, depth]: the two branches (G, 2, n) and each configuration's depth (G, 1), which
# travels with it; β = w₊^D − w₋^D is recorded. A 0–1 error has no divergence to show: the norms do.
DIAGONAL_NETS = {loss: Family(penalty="beta1", curves=METRICS, finite=("train_error", "l1", "l2"), operands=("X", "y"),
                              target="b_star", evaluate=_observe_diagonal_net(loss), result=_diagonal_net_result,
                              unbatched={"X": 2, "X_test": 2, "directions": 2}, traces=("projections",),
                              view=lambda x: signed_powers(*x)[0], fused=compiled(fused.diagonal_steps(loss), None))
                 for loss in LOSSES}


def _test_set(X_test, y_test, n: int, G: int, loss: str):
    """The optional test set as tensors, both or neither; labels ±1 for the logistic loss."""
    if (X_test is None) != (y_test is None):
        raise ValueError("X_test and y_test must be given together, got only "
                         + ("X_test" if y_test is None else "y_test"))
    if X_test is None:
        return None, None
    X_test, y_test = _tensor("X_test", X_test, "(M, n)", G), _tensor("y_test", y_test, "(M,)", G)
    if X_test.shape[-1] != n or y_test.shape[-1] != X_test.shape[-2]:
        raise ValueError(f"X_test must have n = {n} columns and y_test one label per row, got shapes "
                         f"{tuple(X_test.shape)} and {tuple(y_test.shape)}")
    check_finite("X_test", X_test)
    check_finite("y_test", y_test)
    _labels("y_test", y_test, loss)
    return X_test, y_test


def _labels(name: str, y: torch.Tensor, loss: str) -> None:
    if loss == "logistic" and not ((y == 1) | (y == -1)).all():
        raise ValueError(f"{name} must hold labels -1 and +1 for loss='logistic', got values "
                         f"{show(sorted(set(torch.unique(y).tolist()))[:5])}")


@cached
def diagonal_net(X, y, *, alpha, steps, depth=2, init_scale=1.0, beta1=0.0, beta2=0.0, loss="square", b_star=None,
                 X_test=None, y_test=None, directions=None, record_b=False, dense=1000, per_decade=100,
                 stop_periodic=True, device="auto", progress=None) -> DiagonalNetTrajectory:
    r"""Gradient descent on the diagonal linear network :math:`\beta = w_+^{\odot D} - w_-^{\odot D}`
    of Woodworth et al. (eq. 10; D = 2 is their eq. 3) and Lyu et al. (eq. 4, D = 2), from the
    unbiased initialisation :math:`w_+(0) = w_-(0) = \zeta\mathbf 1` (so β(0) = 0), for

    .. math:: \ell(\beta) + \beta_1\sum_\pm\|w_\pm\|_1 + \tfrac{\beta_2}2\sum_\pm\|w_\pm\|_2^2 .

    ``loss="square"``: :math:`\ell = \tfrac12\|\tilde X\beta - y\|_2^2` (Woodworth et al.'s
    :math:`\sum_n(f - y_n)^2` is twice it: the same path at twice the speed); ``"logistic"``:
    :math:`\ell = \tfrac1N\sum_i\log(1 + e^{-y_i\langle\beta, x_i\rangle})`, labels ±1 (Lyu et al.'s code).
    ``beta2`` is coupled weight decay (Lyu et al.'s λ, torch SGD's ``weight_decay``).

    Naming: the papers' α, the initialisation scale, is ``init_scale`` ζ here (one entry of
    :math:`w_\pm(0)`, so :math:`\|\theta(0)\|_2 = \zeta\sqrt{2n}`, the α of Lyu et al.'s code);
    ``alpha`` is the learning rate, and continuous time is ``alpha * steps``.

    ``alpha`` > 0, ``beta1``, ``beta2`` ≥ 0, ``init_scale`` > 0 and ``depth`` (integers ≥ 1) are
    scalars or (G,) grids of one length (:func:`grokkit.kernels.grid`), all run in one batch. ``X``
    (N, n) and ``y`` (N,) are shared, or one per configuration ((G, N, n), (G, N)). ``b_star`` (the
    ground truth) or a test set ``X_test`` (M, n), ``y_test`` (M,) sets ``test_error``. ``directions``
    (k, n), shared, or (G, k, n) adds ``projections``, :math:`\langle\beta, d_k\rangle` at every record.

    Returns a :class:`DiagonalNetTrajectory` of β on :func:`~grokkit.kernels.log_schedule`:
    ``train_error`` (square: :math:`\|\tilde X\beta - y\|/\|y\|`; logistic: the training 0–1 error),
    ``test_error`` (square: :math:`\|\beta - \beta^*\|/\|\beta^*\|`, or the relative residual on the test
    set; logistic: the test 0–1 error; NaN without either), ``l1``, ``l2`` of β, ``grad_ratio``
    (the penalties' gradient over the loss's, in θ), ``b`` (G, T, n) with ``record_b``, ``b_final``
    and ``projections`` (G, T, k) with ``directions``; ``config["depth"]`` the depths. No step-size check applies (the Hessian grows
    with the weights): configurations that diverge are stopped and reported (``RuntimeWarning``).
    Raises ``ValueError`` before any compute for a bad input."""
    check_option("loss", loss, LOSSES)
    depth = _depths(depth)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    check_int("dense", dense, 0)
    check_int("per_decade", per_decade, 1)
    device = resolve_device(device)
    config = configurations(alpha=alpha, beta1=beta1, beta2=beta2, init_scale=init_scale)
    if not (config["init_scale"] > 0).all():
        raise ValueError(f"init_scale must be in (0, inf): β = 0 is a stationary point, got "
                         f"{config['init_scale'][config['init_scale'] <= 0][0]:g}")
    G = max(config["alpha"].size, depth.size, _leading(X, 2), _leading(y, 1),
            _leading(b_star, 1) if b_star is not None else 1, _leading(directions, 2) if directions is not None else 1)
    for name, size in (("depth", depth.size), ("alpha, beta1, beta2 and init_scale", config["alpha"].size)):
        if size not in (1, G):
            raise ValueError(f"{name} must be one value or one per configuration (G = {G}), got {size}")
    config = {k: np.broadcast_to(v, (G,)).copy() for k, v in config.items()}
    config["depth"] = np.broadcast_to(depth, (G,)).copy()
    X, y, b_star = _problem(X, y, b_star, G)
    N, n = X.shape[-2:]
    _labels("y", y, loss)
    if loss == "square":
        _nonzero("y", y, "training")
    X_test, y_test = _test_set(X_test, y_test, n, G, loss)
    W0 = torch.as_tensor(config["init_scale"], dtype=torch.float64)[:, None, None].expand(G, 2, n).clone()
    x0 = [W0.to(device), torch.as_tensor(config["depth"], dtype=torch.float64, device=device)[:, None]]
    data = {"X": X.to(device), "y": y.to(device), "b_star": None if b_star is None else b_star.to(device)}
    if X_test is not None:
        data.update(X_test=X_test.to(device), y_test=y_test.to(device))
    if directions is not None:
        directions = _tensor("directions", directions, "(k, n)", G)
        if directions.shape[-1] != n or directions.shape[-2] < 1:
            raise ValueError(f"directions must have shape (k, n) or (G, k, n) with k >= 1 and n = {n} (the columns "
                             f"of X), got {tuple(directions.shape)}")
        check_finite("directions", directions)
        data["directions"] = directions.to(device)
    step = _diagonal_net_step(loss, int(depth[0]) if np.all(depth == depth[0]) else None, bool(config["beta1"].any()))
    return run(DIAGONAL_NETS[loss], "diagonal_net", step, data, config, x0, steps,
               work=G * N * n, record=record_b, dense=dense, per_decade=per_decade, stop_periodic=stop_periodic,
               progress=progress)
