"""The deep matrix factorization kernel (grokkit.kernels.matrix.deep, eqs. 128-130) in the shared
loop, against a plain numpy loop; and the effective rank (grokkit.metrics.effective_rank)."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from grokkit import data, metrics
from grokkit.kernels import matrix as mk

N1, N2 = 6, 5


def problem(kind: str, seed: int = 0):
    return data.matrix.problem(N1, N2, 2, 20 if kind == "completion" else 24, kind=kind, seed=seed)


def operator_of(p):
    return p.mask if p.kind == "completion" else p.X


def explicit(p) -> np.ndarray:
    """The (N, n1 n2) matrix of the operator on column-major vec."""
    if p.kind == "sensing":
        return p.X
    rows = np.flatnonzero(p.mask.ravel())  # row-major order, as A[mask]
    out = np.zeros((rows.size, N1 * N2))
    for k, flat in enumerate(rows):
        i, j = divmod(flat, N2)
        out[k, j * N1 + i] = 1.0
    return out


def numpy_factors(depth: int, init: str, seed: int) -> list[np.ndarray]:
    """The initial factors at zeta = 1, of inner dimension d = max(n1, n2): "random", the paper's
    N(0, 1/n) entries, n the factor's number of entries, drawn factor after factor from
    RandomState(seed); "identity", the authors' rectangular identities."""
    d = max(N1, N2)
    dims = [N1, N2] if depth == 1 else [N1] + [d] * (depth - 1) + [N2]
    rng = np.random.RandomState(seed)
    return [rng.randn(a, b) / np.sqrt(a * b) if init == "random" else np.eye(a, b) for a, b in zip(dims[:-1], dims[1:])]


def prod(factors, n: int | None = None) -> np.ndarray:
    """A_1 ... A_k, the n x n identity for no factor."""
    return functools.reduce(np.matmul, factors) if factors else np.eye(n)


def factor_gradient(F: list[np.ndarray], G: np.ndarray, k: int) -> np.ndarray:
    """(prod_{i<k} A_i)^T G (prod_{i>k} A_i)^T (eq. 129)."""
    return prod(F[:k], N1).T @ G @ prod(F[k + 1:], N2).T


def polar(A: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(A, full_matrices=False)
    return U @ Vt


def numpy_run(p, depth, alpha, beta_star, beta2, zeta, init, seed, steps, at):
    """Eqs. 128-130 for one configuration, every factor updated from the same iterate:
    A_k <- (1 - alpha beta2) A_k - alpha (prod_{i<k} A_i)^T G(A) (prod_{i>k} A_i)^T - alpha beta* h(A_k).
    Returns the factors at each step of ``at``."""
    X = explicit(p)
    F = [zeta * f for f in numpy_factors(depth, init, seed)]
    out = {}
    for t in range(steps + 1):
        if t in at:
            out[t] = [f.copy() for f in F]
        if t == steps:
            break
        A = prod(F)
        G = (X.T @ (X @ A.reshape(-1, order="F") - p.y)).reshape(N2, N1).T
        F = [(1 - alpha * beta2) * F[k] - alpha * factor_gradient(F, G, k) - alpha * beta_star * polar(F[k])
             for k in range(depth)]
    return out


def numpy_curves(p, factors, beta_star, beta2) -> dict[str, float]:
    X = explicit(p)
    A = prod(factors)
    r = X @ A.reshape(-1, order="F") - p.y
    G = (X.T @ r).reshape(N2, N1).T
    grads = [factor_gradient(factors, G, k) + beta2 * factors[k] for k in range(len(factors))]
    h = np.sqrt(sum(min(f.shape) for f in factors))
    return {"train_error": np.linalg.norm(r) / np.linalg.norm(p.y),
            "test_error": np.linalg.norm(A - p.A_star) / np.linalg.norm(p.A_star),
            "nuclear": np.linalg.svd(A, compute_uv=False).sum(),
            "frobenius": np.linalg.norm(A),
            "grad_ratio": beta_star * h / np.sqrt(sum(np.sum(g ** 2) for g in grads)),
            "factor_nuclear": sum(np.linalg.svd(f, compute_uv=False).sum() for f in factors)}


GRID = {"alpha": [0.05, 0.02, 0.03], "beta_star": [1e-2, 0.0, 1e-2], "beta2": [0.0, 0.05, 0.01],
        "init_scale": [1.0, 1.0, 0.6]}


@pytest.mark.parametrize("kind", mk.KINDS)
@pytest.mark.parametrize("depth", [2, 3])
@pytest.mark.parametrize("init", mk.DEEP_INITS)
def test_deep_kernel_equals_a_numpy_loop(kind: str, depth: int, init: str) -> None:
    """300 steps of a (alpha, beta*, beta2, zeta) grid: the product, every recorded curve and the
    factors' nuclear norms, against eqs. 128-130 written in numpy.

    With beta* > 0 the subgradient h(A_k) = UV^T of a factor amplifies rounding by 1/sigma_min(A_k),
    and the random factors' smallest singular values reach 1e-7 within these steps (the nuclear
    term drives them to 0), so two correct implementations part: beta* > 0 is checked from the
    identity (factors well conditioned over the run), the random draw at beta* = 0."""
    p = problem(kind)
    steps = 300
    grid = {**GRID, "alpha": [a / p.lambda_max for a in GRID["alpha"]]}  # lambda_max = 1 for completion
    if init == "random":
        grid["beta_star"] = [0.0, 0.0, 0.0]
    traj = mk.deep(operator_of(p), p.y, (N1, N2), depth=depth, **grid, steps=steps, A_star=p.A_star, init=init,
                   seed=3, record_A=True, dense=100, per_decade=10, stop_periodic=False, device="cpu",
                   progress=False)
    assert traj.depth == depth and traj.method == "deep" and not traj.diverged.any()
    checked = [0, 7, 100, int(traj.steps[-2]), steps]
    for g in range(3):
        hyper = {k: v[g] for k, v in grid.items()}
        ref = numpy_run(p, depth, hyper["alpha"], hyper["beta_star"], hyper["beta2"], hyper["init_scale"], init, 3,
                        steps, checked)
        np.testing.assert_allclose(traj.A_final[g], prod(ref[steps]), atol=1e-10, rtol=0)
        for t in checked:
            j = int(np.searchsorted(traj.steps, t))
            assert traj.steps[j] == t
            np.testing.assert_allclose(traj.A[g, j], prod(ref[t]), atol=1e-10, rtol=0)
            curves = numpy_curves(p, ref[t], hyper["beta_star"], hyper["beta2"])
            for name, value in curves.items():
                np.testing.assert_allclose(getattr(traj, name)[g, j], value, rtol=1e-9, atol=1e-12,
                                           err_msg=f"{name} of configuration {g} at step {t}")
            np.testing.assert_allclose(traj.singular_values[g, j], np.linalg.svd(prod(ref[t]), compute_uv=False),
                                       atol=1e-10)


def test_batched_grid_equals_one_configuration_at_a_time() -> None:
    p = problem("completion", seed=1)
    common = dict(steps=1500, A_star=p.A_star, dense=100, per_decade=20, device="cpu", progress=False)
    batched = mk.deep(p.mask, p.y, (N1, N2), depth=3, **GRID, **common)
    for g in range(3):
        one = mk.deep(p.mask, p.y, (N1, N2), depth=3, **{k: v[g] for k, v in GRID.items()}, **common)
        np.testing.assert_allclose(batched.A_final[g], one.A_final[0], atol=1e-12, rtol=0)
        for name in mk.DEEP_CURVES:
            np.testing.assert_allclose(getattr(batched, name)[g], getattr(one, name)[0], rtol=1e-10, atol=1e-14,
                                       err_msg=name)


@pytest.mark.parametrize("kind", mk.KINDS)
@pytest.mark.parametrize("init", mk.DEEP_INITS)
def test_depth_one_is_the_subgradient_kernel(kind: str, init: str) -> None:
    """L = 1 is subgradient descent on A (eq. 101) from the same initial point: the same numbers,
    bit for bit, including the early stop of a configuration that reaches a fixed point
    and decaying step sizes (alpha_decay)."""
    p = problem(kind, seed=2)
    grid = {"alpha": [0.3, 0.2, 0.1], "beta_star": [1e-2, 0.0, 0.1], "beta2": [0.05, 0.0, 0.0],
            "init_scale": [0.1, 1e-3, 1.0], "alpha_decay": [100.0, np.inf, 10.0]}  # decaying steps too
    if kind == "sensing":
        grid["alpha"] = [a / p.lambda_max for a in grid["alpha"]]
    common = dict(steps=3000, A_star=p.A_star, init=init, seed=5, record_A=True, dense=100, per_decade=20,
                  device="cpu", progress=False)
    deep = mk.deep(operator_of(p), p.y, (N1, N2), depth=1, **grid, **common)
    shallow = mk.subgradient(operator_of(p), p.y, (N1, N2), **grid, **common)
    for name in ("steps", "A", "A_final", "singular_values", "stopped_at", "diverged", *mk.CURVES):
        np.testing.assert_array_equal(getattr(deep, name), getattr(shallow, name), err_msg=name)
    np.testing.assert_allclose(deep.factor_nuclear, deep.nuclear, rtol=1e-14)
    assert shallow.factor_nuclear is None and shallow.depth == 1
    assert (deep.stopped_at[1] > 0) == (kind == "completion")  # beta* = 0: a fixed point on completion


def test_a_stopped_configuration_leaves_the_others_unchanged() -> None:
    """Zero factors are a fixed point (a saddle) of eqs. 128-130 at beta* = 0: that configuration
    is stopped early and its records filled; the other one runs as it would alone."""
    p = problem("completion")
    both = mk.deep(p.mask, p.y, (N1, N2), depth=2, alpha=0.05, beta_star=0.0, init_scale=[0.0, 0.5], steps=3000,
                   A_star=p.A_star, record_A=True, device="cpu", progress=False)
    alone = mk.deep(p.mask, p.y, (N1, N2), depth=2, alpha=0.05, beta_star=0.0, init_scale=0.5, steps=3000,
                    A_star=p.A_star, device="cpu", progress=False)
    assert both.stopped_at[0] == both.steps[np.searchsorted(both.steps, 1000, side="right")]
    assert both.stopped_at[1] == -1
    assert (both.A[0] == 0).all() and (both.test_error[0] == 1.0).all() and (both.factor_nuclear[0] == 0).all()
    np.testing.assert_allclose(both.A_final[1], alone.A_final[0], atol=1e-12, rtol=0)
    np.testing.assert_allclose(both.test_error[1], alone.test_error[0], rtol=1e-10)


def test_divergence_is_reported_and_the_others_run_on() -> None:
    """A step far too large for depth 3 (alpha = 1 is below the shallow bound 2, but the product's
    scale enters the deep step) makes the factors overflow: stopped, NaN afterwards, warned."""
    p = problem("completion")
    with pytest.warns(RuntimeWarning, match=r"deep: 1 configuration\(s\) diverged .*#0 \(alpha=1, beta_star=0.01"):
        traj = mk.deep(p.mask, p.y, (N1, N2), depth=3, alpha=[1.0, 0.02], beta_star=1e-2, init_scale=1.0,
                       steps=1000, A_star=p.A_star, dense=100, device="cpu", progress=False)
    alone = mk.deep(p.mask, p.y, (N1, N2), depth=3, alpha=0.02, beta_star=1e-2, init_scale=1.0, steps=1000,
                    A_star=p.A_star, dense=100, device="cpu", progress=False)
    assert traj.diverged.tolist() == [True, False]
    assert np.isnan(traj.A_final[0]).all() and np.isnan(traj.test_error[0, -1])
    assert np.isnan(traj.train_error[0]).any() and np.isfinite(traj.train_error[0, 0])
    np.testing.assert_allclose(traj.A_final[1], alone.A_final[0], atol=1e-12, rtol=0)


def test_a_deep_run_is_cached(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """grokkit.cache: the same call is computed once, a different depth is another entry."""
    from grokkit import cache

    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    p = problem("completion")
    kwargs = dict(alpha=0.05, beta_star=1e-2, steps=50, A_star=p.A_star, device="cpu")
    first = mk.deep(p.mask, p.y, (N1, N2), depth=2, **kwargs)
    second = mk.deep(p.mask, p.y, (N1, N2), depth=2, progress=False, **kwargs)
    mk.deep(p.mask, p.y, (N1, N2), depth=3, **kwargs)
    assert [e["hit"] for e in cache.events()[-3:]] == [False, True, False]
    assert [e["function"] for e in cache.events()[-3:]] == ["deep"] * 3
    np.testing.assert_array_equal(first.A_final, second.A_final)
    assert second.depth == 2 and second.factor_nuclear is not None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"depth": 0}, r"depth must be an integer in \[1, inf\), got 0"),
    ({"depth": 2.5}, r"depth must be an integer in \[1, inf\), got 2.5"),
    ({"depth": "2"}, r"depth must be an integer in \[1, inf\), got '2'"),
    ({"depth": True}, r"depth must be an integer in \[1, inf\), got True"),
    ({"alpha": 2.0}, r"alpha must be in \(0, 2/\(lambda_max \+ beta2\)\) = \(0, 2\) for stability, got 2"),
    ({"beta_star": -1.0}, r"beta_star must be in \[0.0, inf\), got -1.0"),
    ({"init_scale": [0.1, -0.1]}, r"init_scale must be in \[0.0, inf\), got -0.1"),
    ({"init": "orthogonal"}, r"init must be one of"),
    ({"steps": 0}, r"steps must be an integer in \[1, "),
    ({"seed": -1}, r"seed must be an integer in \[0, 2\*\*32 - 1\]"),
    ({"y": np.zeros(20)}, r"y must be nonzero"),
    ({"shape": (N1,)}, r"shape must be a pair \(n1, n2\), got \(6,\)"),
    ({"operator": np.ones((N2, N1), dtype=bool)}, r"mask must be a boolean tensor of shape \(6, 5\)"),
    ({"operator": np.ones((20, N1 * N2 + 1))}, r"X must have shape \(N, 30\)"),
    ({"A_star": np.zeros((N1, N2))}, r"A_star must be nonzero"),
    ({"device": "tpu"}, r"device must be one of 'auto', 'cpu', 'cuda', 'cuda:K'"),
])
def test_bad_input_is_refused(kwargs: dict, message: str) -> None:
    p = problem("completion")
    call = {"operator": p.mask, "y": p.y, "shape": (N1, N2), "depth": 2, "alpha": 0.05, "beta_star": 1e-2,
            "steps": 10, "A_star": p.A_star, **kwargs}
    with pytest.raises(ValueError, match=message):
        mk.deep(call.pop("operator"), call.pop("y"), call.pop("shape"), **call)


def test_effective_rank() -> None:
    sigma = np.array([[3.0, 3.0, 0.0], [1.0, 0.0, 0.0], [4.0, 2.0, 1.0]])
    p = sigma[2] / 7.0
    np.testing.assert_allclose(metrics.effective_rank(sigma), [2.0, 1.0, np.exp(-(p * np.log(p)).sum())],
                               rtol=1e-15)
    assert metrics.effective_rank(np.ones((2, 3, 4))).shape == (2, 3)
    with pytest.raises(ValueError, match=r"singular_values must be >= 0, got -1.0"):
        metrics.effective_rank([1.0, -1.0])
    with pytest.raises(ValueError, match="must not be all zero"):
        metrics.effective_rank([[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="singular_values must be finite"):
        metrics.effective_rank([1.0, np.nan])


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_step_size_limit_is_two_over_the_largest_hessian_eigenvalue(depth: int) -> None:
    """At balanced factors of a rank-2 matrix, fully observed, the Hessian of
    1/2 ||A_1...A_L - A||_F^2 in the factors (autograd) has largest eigenvalue L sigma_1^{2(L-1)/L}."""
    import torch

    from grokkit import theory

    rng = np.random.RandomState(depth)
    n1, n2, d, r = 4, 3, 4, 2
    U, _ = np.linalg.qr(rng.randn(n1, r))
    V, _ = np.linalg.qr(rng.randn(n2, r))
    S = np.array([3.0, 1.5])
    A = (U * S) @ V.T
    root, E = np.diag(S ** (1.0 / depth)), np.eye(d)[:, :r]
    factors = ([(U * S) @ V.T] if depth == 1 else
               [U @ root @ E.T] + [E @ root @ E.T] * (depth - 2) + [E @ root @ V.T])
    np.testing.assert_allclose(prod(factors), A, atol=1e-14)
    shapes = [f.shape for f in factors]
    sizes = [f.size for f in factors]

    def loss(flat):
        parts = torch.split(flat, sizes)
        product = functools.reduce(torch.matmul, [q.reshape(s) for q, s in zip(parts, shapes)])
        return 0.5 * ((product - torch.as_tensor(A)) ** 2).sum()

    H = torch.autograd.functional.hessian(loss, torch.as_tensor(np.concatenate([f.ravel() for f in factors])))
    largest = np.linalg.eigvalsh(H.numpy()).max()
    np.testing.assert_allclose(theory.matrix.deep_step_size_limit(3.0, depth), 2.0 / largest, rtol=1e-12)
    np.testing.assert_allclose(theory.matrix.deep_step_size_limit([3.0, 1.0], depth, lambda_max=2.0),
                               [1.0 / largest, 1.0 / depth], rtol=1e-12)
    for kwargs, message in (({"depth": 0}, r"depth must be an integer in \[1, inf\), got 0"),
                            ({"sigma_max": -1.0}, r"sigma_max must be in \(0.0, inf\), got -1.0"),
                            ({"lambda_max": 0.0}, r"lambda_max must be in \(0.0, inf\), got 0.0")):
        with pytest.raises(ValueError, match=message):
            theory.matrix.deep_step_size_limit(**{"sigma_max": 3.0, "depth": 2, **kwargs})
