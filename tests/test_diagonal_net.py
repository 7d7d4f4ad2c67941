"""The diagonal linear network β = w₊^D − w₋^D of Woodworth et al. and Lyu et al.
(``grokkit.kernels.diagonal_net``): against a plain numpy loop for both losses, batched against one
configuration at a time (depths, scales, learning rates and penalties mixed), its update direction
against autograd, the curves it records, and bad inputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from grokkit import data
from grokkit.kernels import sparse


@pytest.fixture(scope="module")
def regression():
    return data.sparse.problem(20, 3, 12, variance="1/N", seed=1)


@pytest.fixture(scope="module")
def classification():
    rs = np.random.RandomState(3)
    X = rs.choice([-1.0, 1.0], size=(30, 40))
    w = np.zeros(40)
    w[:3] = 1.0
    X_test = rs.choice([-1.0, 1.0], size=(50, 40))
    return X, np.sign(X @ w), X_test, np.sign(X_test @ w)


def numpy_diagonal_net(X, y, loss, depth, zeta, alpha, beta1, beta2, steps):
    """The update of :func:`grokkit.kernels.diagonal_net` in plain numpy, one configuration."""
    u, v = np.full(X.shape[1], zeta), np.full(X.shape[1], zeta)
    out = [u ** depth - v ** depth]
    for _ in range(steps):
        beta = u ** depth - v ** depth
        if loss == "square":
            g = X.T @ (X @ beta - y)
        else:
            g = X.T @ (-y / (1 + np.exp(y * (X @ beta)))) / len(y)
        du = depth * u ** (depth - 1) * g + beta1 * np.sign(u) + beta2 * u
        dv = -depth * v ** (depth - 1) * g + beta1 * np.sign(v) + beta2 * v
        u, v = u - alpha * du, v - alpha * dv
        out.append(u ** depth - v ** depth)
    return np.array(out)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_square_loss_against_a_plain_numpy_loop(regression, depth) -> None:
    p = regression
    alpha, beta1, beta2, zeta = 0.05, 1e-3, 1e-2, 0.7
    traj = sparse.diagonal_net(p.X, p.y, b_star=p.b_star, depth=depth, alpha=alpha, beta1=beta1, beta2=beta2,
                               init_scale=zeta, steps=80, record_b=True, device="cpu")
    expected = numpy_diagonal_net(p.X, p.y, "square", depth, zeta, alpha, beta1, beta2, 80)
    assert np.linalg.norm(expected[-1]) > 0.1 * np.linalg.norm(p.b_star)  # it moved
    np.testing.assert_allclose(traj.b[0], expected[traj.steps], rtol=1e-10, atol=1e-13)
    err = np.linalg.norm(expected[-1] - p.b_star) / np.linalg.norm(p.b_star)
    assert traj.test_error[0, -1] == pytest.approx(err, rel=1e-10)
    res = np.linalg.norm(p.X @ expected[-1] - p.y) / np.linalg.norm(p.y)
    assert traj.train_error[0, -1] == pytest.approx(res, rel=1e-10)
    assert traj.l1[0, -1] == pytest.approx(np.abs(expected[-1]).sum(), rel=1e-10)


def test_logistic_loss_against_a_plain_numpy_loop(classification) -> None:
    X, y, X_test, y_test = classification
    traj = sparse.diagonal_net(X, y, loss="logistic", X_test=X_test, y_test=y_test, alpha=0.5, beta2=1e-2,
                               init_scale=0.3, steps=300, record_b=True, device="cpu")
    expected = numpy_diagonal_net(X, y, "logistic", 2, 0.3, 0.5, 0.0, 1e-2, 300)
    np.testing.assert_allclose(traj.b[0], expected[traj.steps], rtol=1e-10, atol=1e-13)
    assert traj.train_error[0, -1] == np.mean(y * (X @ expected[-1]) <= 0)
    assert traj.test_error[0, -1] == np.mean(y_test * (X_test @ expected[-1]) <= 0)
    assert traj.train_error[0, 0] == 1.0  # β(0) = 0 classifies nothing
    assert traj.train_error[0, -1] == 0.0 and traj.test_error[0, -1] < 0.5


def test_batched_equals_one_at_a_time(regression) -> None:
    """Depths, scales, learning rates and penalties in one batch give each configuration's own run."""
    p = regression
    hyper = dict(depth=[1, 2, 3, 2], init_scale=[0.5, 0.7, 0.9, 0.2], alpha=[0.05, 0.05, 0.02, 0.1],
                 beta1=[0.0, 1e-3, 0.0, 0.0], beta2=[1e-3, 0.0, 1e-2, 0.0])
    kw = dict(b_star=p.b_star, steps=150, record_b=True, device="cpu")
    batch = sparse.diagonal_net(p.X, p.y, **hyper, **kw)
    assert batch.config["depth"].tolist() == hyper["depth"]
    for g in range(4):
        one = sparse.diagonal_net(p.X, p.y, **{k: v[g] for k, v in hyper.items()}, **kw)
        np.testing.assert_allclose(batch.b[g], one.b[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(batch.test_error[g], one.test_error[0], rtol=1e-12)


@pytest.mark.parametrize("loss", ["square", "logistic"])
def test_update_direction_is_the_autograd_gradient(regression, classification, loss) -> None:
    X, y = (regression.X, regression.y) if loss == "square" else classification[:2]
    rs = np.random.RandomState(0)
    W = torch.tensor(rs.rand(1, 2, X.shape[1]) + 0.1, requires_grad=True)
    beta2, depth = 0.3, 3
    beta = W[0, 0] ** depth - W[0, 1] ** depth
    f = torch.as_tensor(X) @ beta
    yt = torch.as_tensor(y)
    ell = (0.5 * ((f - yt) ** 2).sum() if loss == "square" else torch.nn.functional.softplus(-yt * f).mean())
    (ell + beta2 / 2 * (W ** 2).sum()).backward()
    step = sparse._diagonal_net_step(loss, depth, False)
    col = lambda v: torch.full((1, 1), v, dtype=torch.float64)
    new, _ = step([W.detach(), col(depth)], torch.as_tensor(X), yt, col(1.0), col(0.0), col(beta2))
    np.testing.assert_allclose((W.detach() - new).numpy(), W.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_small_and_large_initialisations_give_the_two_regimes(regression) -> None:
    """Woodworth et al.'s two regimes on one problem (N < n): a large scale converges to the
    minimum-ℓ2 interpolant, a small one heads for the minimum-ℓ1 one (basis pursuit, here β*)."""
    p = regression
    traj = sparse.diagonal_net(p.X, p.y, b_star=p.b_star, alpha=[0.08, 2e-4], init_scale=[1e-2, 10.0],
                               steps=20000, device="cpu")
    min_norm = np.linalg.pinv(p.X) @ p.y
    assert traj.train_error[1, -1] < 1e-9
    assert np.linalg.norm(traj.b_final[1] - min_norm) < 1e-6 * np.linalg.norm(min_norm)
    small = traj.b_final[0]
    assert np.linalg.norm(small - p.b_star) < np.linalg.norm(small - min_norm)  # 0.09 against 0.17
    assert traj.l1[0, -1] < 0.8 * traj.l1[1, -1]


@pytest.mark.parametrize("change, message", [
    (dict(loss="hinge"), "loss must be one of"),
    (dict(init_scale=0.0), "init_scale must be in \\(0, inf\\)"),
    (dict(depth=0), "depth must be"),
    (dict(alpha=-1.0), "alpha must be"),
    (dict(X_test=np.ones((3, 20))), "X_test and y_test must be given together"),
    (dict(X_test=np.ones((3, 19)), y_test=np.ones(3)), "X_test must have n = 20 columns"),
    (dict(loss="logistic"), "y must hold labels -1 and \\+1"),
    (dict(depth=[1, 2, 3], init_scale=[0.1, 0.2]), "must be one value or one per configuration"),
])
def test_bad_input_is_refused_before_any_compute(regression, change, message) -> None:
    p = regression
    kw = dict(alpha=0.1, steps=10, device="cpu") | change
    with pytest.raises(ValueError, match=message):
        sparse.diagonal_net(p.X, p.y, **kw)
