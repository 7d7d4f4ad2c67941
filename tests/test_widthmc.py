"""The two-factor models of the background papers (grokkit.kernels.matrix.two_factor): Woodworth
et al.'s asymmetric W = UV^T of width k (§6) and Lyu et al.'s W = UU^T - VV^T with weight decay
(§3.3.3, eq. 5), against plain numpy loops, autograd and a hand-worked step; the batched grid
against one configuration at a time; their data (grokkit.data.background.multiplication_table,
diagonal_measurements, low_rank_matrix's "gaussian" generator); bad inputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from grokkit import data, theory
from grokkit.kernels import matrix as mk

D = 6


def problem(seed: int = 0, N: int = 20, n1: int = D, n2: int = D):
    rs = np.random.RandomState(seed)
    A_star = rs.randn(n1, 1) @ rs.randn(1, n2)
    mask = data.matrix.completion_mask(A_star, N, seed=seed)
    return A_star, mask, A_star[mask]


def numpy_factors(model: str, shape, width: int, init_scale: float, seed: int):
    """The documented initial factors: hidden unit j is row j of RandomState(seed).randn(k, n1 + n2)
    (asymmetric), or U = V = init_scale I (symmetric)."""
    n1, n2 = shape
    if model == "symmetric":
        return init_scale * np.eye(n1), init_scale * np.eye(n1)
    Z = np.random.RandomState(seed).randn(width, n1 + n2)
    return init_scale * Z[:, :n1].T, init_scale * Z[:, n1:].T


def numpy_run(model: str, mask, y, shape, *, width, init_scale, alpha, beta2, steps, seed=0):
    """Plain gradient descent, written from the papers' objectives: Woodworth et al.'s
    sum_n (W_{i_n j_n} - y_n)^2 with W = UV^T; Lyu et al.'s (1/N) sum_n (W_{i_n j_n} - y_n)^2 with
    W = UU^T - VV^T; plus (beta2/2)(|U|^2 + |V|^2). Returns the products after 0, ..., steps updates."""
    U, V = numpy_factors(model, shape, width, init_scale, seed)
    rows, cols = np.nonzero(mask)
    out = []
    for t in range(steps + 1):
        W = U @ V.T if model == "asymmetric" else U @ U.T - V @ V.T
        out.append(W)
        if t == steps:
            break
        r = W[rows, cols] - y
        G = np.zeros(shape)
        np.add.at(G, (rows, cols), r)
        if model == "asymmetric":
            gU, gV = 2 * G @ V, 2 * G.T @ U
        else:
            S = 2 / len(y) * (G + G.T)
            gU, gV = S @ U, -S @ V
        U, V = U - alpha * (gU + beta2 * U), V - alpha * (gV + beta2 * V)
    return np.array(out)


@pytest.mark.parametrize("model, width, beta2", [("asymmetric", 4, 0.0), ("asymmetric", 9, 0.05),
                                                 ("symmetric", None, 0.0), ("symmetric", None, 0.02)])
def test_against_numpy(model, width, beta2):
    A_star, mask, y = problem()
    alpha, init_scale, steps = (0.02, 0.3, 60) if model == "asymmetric" else (0.1, 1.0, 60)
    traj = mk.two_factor(mask, y, (D, D), model=model, width=width, alpha=alpha, init_scale=init_scale,
                         beta2=beta2, steps=steps, A_star=A_star, seed=3, record_A=True, device="cpu",
                         stop_periodic=False)
    ref = numpy_run(model, mask, y, (D, D), width=width, init_scale=init_scale, alpha=alpha, beta2=beta2,
                    steps=steps, seed=3)
    np.testing.assert_allclose(traj.A[0], ref[traj.steps], rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj.A_final[0], ref[-1], rtol=0, atol=1e-12)
    residual = np.linalg.norm(ref[:, mask] - y, axis=1) / np.linalg.norm(y)
    np.testing.assert_allclose(traj.train_error[0], residual[traj.steps], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(traj.test_error[0],
                               np.linalg.norm(ref - A_star, axis=(1, 2))[traj.steps] / np.linalg.norm(A_star),
                               rtol=1e-10)
    np.testing.assert_allclose(traj.nuclear[0], [np.linalg.svd(W, compute_uv=False).sum() for W in ref[traj.steps]],
                               rtol=1e-10)
    seen = mask | mask.T if model == "symmetric" else mask
    rms = lambda M: np.sqrt(np.mean(M[:, ~seen] ** 2, axis=1))  # noqa: E731
    np.testing.assert_allclose(traj.unobserved_error[0], rms(ref - A_star)[traj.steps], rtol=1e-10)
    np.testing.assert_allclose(traj.unobserved_change[0], rms(ref - ref[0])[traj.steps], rtol=1e-10, atol=1e-15)
    assert traj.depth == 2


def test_batched_equals_one_at_a_time():
    """Widths padded with zero columns, scales, steps and weight decays in one call: each row is
    the run of its configuration alone (up to the rounding of a batched product)."""
    A_star, mask, y = problem(1)
    grid = dict(width=[2, 7, 4], init_scale=[0.5, 0.1, 0.3], alpha=[0.02, 0.01, 0.015], beta2=[0.0, 0.01, 0.1])
    batch = mk.two_factor(mask, y, (D, D), model="asymmetric", steps=300, A_star=A_star, seed=5, device="cpu",
                          **grid)
    assert batch.config["width"].tolist() == [2, 7, 4]
    for g in range(3):
        one = mk.two_factor(mask, y, (D, D), model="asymmetric", steps=300, A_star=A_star, seed=5, device="cpu",
                            **{k: v[g] for k, v in grid.items()})
        np.testing.assert_allclose(batch.A_final[g], one.A_final[0], rtol=0, atol=1e-12)
        for name in ("train_error", "test_error", "nuclear", "unobserved_change"):
            np.testing.assert_allclose(getattr(batch, name)[g], getattr(one, name)[0], rtol=1e-9, atol=1e-13)
    sym = dict(init_scale=[2.0, 1.0], alpha=[0.05, 0.1], beta2=[1e-2, 1e-1])
    batch = mk.two_factor(mask, y, (D, D), model="symmetric", steps=300, A_star=A_star, device="cpu", **sym)
    for g in range(2):
        one = mk.two_factor(mask, y, (D, D), model="symmetric", steps=300, A_star=A_star, device="cpu",
                            **{k: v[g] for k, v in sym.items()})
        np.testing.assert_allclose(batch.A_final[g], one.A_final[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(batch.grad_ratio[g], one.grad_ratio[0], rtol=1e-9)


def test_per_configuration_masks():
    """One mask per configuration (the same N) against each mask alone."""
    A_star, _, _ = problem(2)
    masks, ys = data.matrix.completion_masks(A_star, 15, [0.0, 0.0], seed=0)
    masks[1] = data.matrix.completion_mask(A_star, 15, seed=7)
    ys[1] = A_star[masks[1]]
    batch = mk.two_factor(masks, ys, (D, D), model="symmetric", alpha=0.1, init_scale=1.0, beta2=0.01, steps=100,
                          A_star=A_star, device="cpu")
    for g in range(2):
        one = mk.two_factor(masks[g], ys[g], (D, D), model="symmetric", alpha=0.1, init_scale=1.0, beta2=0.01,
                            steps=100, A_star=A_star, device="cpu")
        np.testing.assert_allclose(batch.A_final[g], one.A_final[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(batch.unobserved_error[g], one.unobserved_error[0], rtol=1e-10)


@pytest.mark.parametrize("model", mk.TWO_FACTOR_MODELS)
@pytest.mark.parametrize("kind", ["completion", "sensing"])
def test_gradients_against_autograd(model, kind):
    rs = np.random.RandomState(4)
    A_star, mask, y = problem(4)
    U, V = rs.randn(D, 5), rs.randn(D, 5)
    if kind == "completion":
        operator, rows = mask, np.flatnonzero(mask.ravel())
        X = np.zeros((len(y), D * D))
        X[np.arange(len(y)), (rows % D) * D + rows // D] = 1.0  # column-major vec
    else:
        X = rs.randn(12, D * D)
        operator, y = X, rs.randn(12)
    Xt = torch.as_tensor(X)

    def loss(U, V):
        W = U @ V.T if model == "asymmetric" else U @ U.T - V @ V.T
        r = Xt @ W.T.reshape(-1) - torch.as_tensor(y)
        return (r**2).sum() if model == "asymmetric" else (r**2).mean()

    expected = theory.matrix.autograd_gradients(loss, U, V)
    op = mk.Measurements(kind, (D, D), **({"mask": torch.as_tensor(mask)} if kind == "completion"
                                          else {"X": torch.as_tensor(X)}))
    got = mk.two_factor_gradients([torch.as_tensor(U)[None], torch.as_tensor(V)[None]], op,
                                  torch.as_tensor(y)[None], model)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g[0].numpy(), e, rtol=1e-12, atol=1e-12)


def test_symmetric_step_by_hand():
    """One entry, d = 1: W = u^2 - v^2 from u = v = zeta, loss (u^2 - v^2 - y)^2 + (beta2/2)(u^2 + v^2).
    The gradient is (4 u r + beta2 u, -4 v r + beta2 v) with r = -y, so after one step
    W = zeta^2 [(1 + 4 alpha y - alpha beta2)^2 - (1 - 4 alpha y - alpha beta2)^2]
      = 16 alpha y zeta^2 (1 - alpha beta2) = 16 * 0.1 * 1 * 4 * 0.95 = 6.08 for zeta = 2."""
    traj = mk.two_factor(np.ones((1, 1), dtype=bool), [1.0], (1, 1), model="symmetric", alpha=0.1, init_scale=2.0,
                         beta2=0.5, steps=1, record_A=True, device="cpu")
    assert traj.A[0, 0, 0, 0] == 0.0
    assert traj.A_final[0, 0, 0] == pytest.approx(6.08, rel=1e-14)


def test_asymmetric_step_by_hand():
    """One entry, width 1: M = uv from (u, v) = zeta * RandomState(0).randn(1, 2); one step of the
    sum loss (uv - y)^2 is u' = u - 2 alpha r v, v' = v - 2 alpha r u with r = uv - y."""
    u, v = 0.5 * np.random.RandomState(0).randn(2)
    r = u * v - 3.0
    expected = (u - 2 * 0.05 * r * v) * (v - 2 * 0.05 * r * u)
    traj = mk.two_factor(np.ones((1, 1), dtype=bool), [3.0], (1, 1), model="asymmetric", width=1, alpha=0.05,
                         init_scale=0.5, steps=1, device="cpu")
    assert traj.A_final[0, 0, 0] == pytest.approx(expected, rel=1e-14)


def test_diagonal_measurements_are_a_wide_diagonal_net():
    """Theorem 4's setting: with diagonal measurements only diag(UV^T) is fitted, and each row i of
    (U, V) conserves (|U_i|^2 + |V_i|^2)^2/4 - <U_i, V_i>^2 along gradient flow (Delta_i^2 - delta_i^2
    in Woodworth et al.'s proof, Appendix G): nearly so for small steps."""
    rs = np.random.RandomState(0)
    X, y = rs.randn(3, 4), rs.randn(3)
    Xs = data.background.diagonal_measurements(X)
    W = rs.randn(4, 4)
    np.testing.assert_allclose(Xs @ W.reshape(-1, order="F"), X @ np.diag(W), rtol=1e-14)
    traj = mk.two_factor(Xs, y, (4, 4), model="asymmetric", width=50, init_scale=0.2, alpha=4e-3, steps=3000,
                         seed=1, device="cpu")
    assert traj.train_error[0, -1] < 1e-4
    U0, V0 = numpy_factors("asymmetric", (4, 4), 50, 0.2, 1)
    start = ((U0**2).sum(1) + (V0**2).sum(1)) ** 2 / 4 - ((U0 * V0).sum(1)) ** 2
    assert np.isnan(traj.unobserved_change[0]).all()  # sensing: no unobserved entries to speak of
    # the invariant is not recorded by the kernel: the run's factors again, with numpy
    U, V = U0.copy(), V0.copy()
    for _ in range(3000):
        r = X @ (U * V).sum(1) - y
        g = 2 * X.T @ r
        U, V = U - 4e-3 * g[:, None] * V, V - 4e-3 * g[:, None] * U
    np.testing.assert_allclose(np.diag(traj.A_final[0]), (U * V).sum(1), rtol=1e-9)
    end = ((U**2).sum(1) + (V**2).sum(1)) ** 2 / 4 - ((U * V).sum(1)) ** 2
    np.testing.assert_allclose(end, start, rtol=1e-2)


def test_data():
    T = data.background.multiplication_table(5)
    i = np.arange(5)
    np.testing.assert_allclose(T, np.outer(i, i) / 25.0, rtol=1e-15, atol=0)
    assert np.linalg.matrix_rank(T) == 1
    Y = data.matrix.low_rank_matrix(4, 3, 1, generator="gaussian", seed=2)
    rs = np.random.RandomState(2)
    np.testing.assert_allclose(Y, rs.randn(4, 1) @ rs.randn(3, 1).T, rtol=0, atol=0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(model="deep"), "model must be one of"),
    (dict(model="asymmetric", width=None), "width must be an integer >= 1"),
    (dict(model="asymmetric", width=[]), "width must be an integer >= 1"),
    (dict(model="asymmetric", width=0), "width must be"),
    (dict(model="asymmetric", width=2.5), "width must be"),
    (dict(model="symmetric", width=3), "width must be None"),
    (dict(model="symmetric", init_scale=0.0), "init_scale must be"),
    (dict(model="asymmetric", width=3, init_scale=-1.0), "init_scale must be"),
    (dict(model="symmetric", alpha=0.0), "alpha must be"),
    (dict(model="symmetric", beta2=-1e-3), "beta2 must be"),
    (dict(model="symmetric", steps=0), "steps must be"),
    (dict(model="symmetric", seed=-1), "seed must be"),
    (dict(model="asymmetric", width=[2, 3], alpha=[0.1, 0.2, 0.3]), "must be scalars or 1-D of one length"),
    (dict(model="symmetric", y=np.zeros(20)), "y must be nonzero"),
    (dict(model="symmetric", y=np.ones(7)), "y must have N = 20"),
    (dict(model="symmetric", A_star=np.zeros((D, D))), "A_star must be nonzero"),
    (dict(model="symmetric", mask=np.ones((D, D + 1), dtype=bool), shape=(D, D + 1)), "shape must be square"),
    (dict(model="symmetric", mask=np.ones((D, D - 1), dtype=bool)), "mask must be a boolean tensor of shape"),
    (dict(model="symmetric", device="tpu"), "device must be"),
])
def test_bad_inputs(kwargs, message):
    A_star, mask, y = problem()
    args = dict(mask=mask, y=y, shape=(D, D), alpha=0.1, init_scale=1.0, steps=5, A_star=A_star)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        mk.two_factor(args.pop("mask"), args.pop("y"), args.pop("shape"), **args)


def test_bad_data_inputs():
    with pytest.raises(ValueError, match="d must be"):
        data.background.multiplication_table(1)
    with pytest.raises(ValueError, match="X must be a matrix"):
        data.background.diagonal_measurements(np.ones(3))
    with pytest.raises(ValueError, match="X must be finite|X must not|X"):
        data.background.diagonal_measurements(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="singular_values must be None for generator 'gaussian'"):
        data.matrix.low_rank_matrix(3, 3, 1, generator="gaussian", singular_values=[1.0])


def test_divergence_is_reported_and_the_others_run_on():
    """No step-size bound is checked for the factor models: a step far too large diverges, is
    stopped and reported, and the other configuration's records are those of its run alone."""
    A_star, mask, y = problem()
    with pytest.warns(RuntimeWarning, match=r"1 configuration\(s\) diverged .*#1 \(alpha=5"):
        batch = mk.two_factor(mask, y, (D, D), model="asymmetric", width=4, alpha=[0.01, 5.0], init_scale=1.0,
                              steps=200, A_star=A_star, device="cpu")
    one = mk.two_factor(mask, y, (D, D), model="asymmetric", width=4, alpha=0.01, init_scale=1.0, steps=200,
                        A_star=A_star, device="cpu")
    assert batch.diverged.tolist() == [False, True]
    np.testing.assert_allclose(batch.A_final[0], one.A_final[0], rtol=0, atol=1e-12)
    assert np.isnan(batch.A_final[1]).all()
