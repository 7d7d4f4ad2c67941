"""The deep diagonal network of §C.11 (``grokkit.kernels.deep``): against a plain numpy loop, batched
against one configuration at a time (depths padded with factors of ones), its update direction
against autograd, the identity (constant) initialisation's sign constraint, the matrix deep
factorization restricted to diagonal factors, stacked problems, and bad inputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from grokkit import data, theory
from grokkit.kernels import matrix, sparse


@pytest.fixture(scope="module")
def problem():
    return data.sparse.problem(20, 3, 12, variance="1/N", seed=1)


def numpy_deep(X, y, B, alpha, beta1, beta2, steps):
    """Eq. (88) in plain numpy, one configuration: every factor from the old iterate."""
    B = B.copy()
    out = [np.prod(B, axis=0)]
    for _ in range(steps):
        g = X.T @ (X @ np.prod(B, axis=0) - y)
        others = np.stack([np.prod(np.delete(B, k, axis=0), axis=0) for k in range(len(B))])
        B = B - alpha * (g * others + beta2 * B + beta1 * np.sign(B))
        out.append(np.prod(B, axis=0))
    return np.array(out)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_against_a_plain_numpy_loop(problem, depth) -> None:
    alpha, beta1, beta2, zeta = 0.05, 1e-3, 1e-2, 2.0
    traj = sparse.deep(problem.X, problem.y, b_star=problem.b_star, depth=depth, alpha=alpha, beta1=beta1,
                       beta2=beta2, init_scale=zeta, steps=60, seed=4, record_b=True, device="cpu")
    B0 = sparse.deep_factors(problem.n, depth, zeta, seed=4)[0]
    expected = numpy_deep(problem.X, problem.y, B0, alpha, beta1, beta2, 60)
    assert np.linalg.norm(expected[-1] - expected[0]) > 0.1 * np.linalg.norm(expected[0])  # it moved
    np.testing.assert_allclose(traj.b[0], expected[traj.steps], rtol=1e-10, atol=1e-13)
    err = np.linalg.norm(expected[-1] - problem.b_star) / np.linalg.norm(problem.b_star)
    assert traj.test_error[0, -1] == pytest.approx(err, rel=1e-10)
    res = np.linalg.norm(problem.X @ expected[-1] - problem.y) / np.linalg.norm(problem.y)
    assert traj.train_error[0, -1] == pytest.approx(res, rel=1e-10)


def test_one_layer_is_the_shallow_subgradient_kernel(problem) -> None:
    kw = dict(b_star=problem.b_star, alpha=0.1, beta1=1e-3, beta2=1e-2, init_scale=1e-2, steps=300, seed=7,
              record_b=True, device="cpu")
    deep = sparse.deep(problem.X, problem.y, depth=1, **kw)
    shallow = sparse.subgradient(problem.X, problem.y, **kw)
    np.testing.assert_allclose(deep.b, shallow.b, rtol=1e-10, atol=1e-15)


def test_batched_depths_equal_one_at_a_time(problem) -> None:
    """Depths, scales and coefficients in one batch (factors of ones after a shallower model's
    last layer) give each configuration's own run."""
    depth, zeta, beta1 = [1, 2, 3, 4, 2], [0.3, 0.5, 0.7, 0.9, 0.5], [0.0, 1e-3, 0.0, 1e-3, 2e-3]
    kw = dict(b_star=problem.b_star, alpha=0.05, beta2=1e-3, steps=200, seed=2, record_b=True, device="cpu")
    batch = sparse.deep(problem.X, problem.y, depth=depth, init_scale=zeta, beta1=beta1, **kw)
    assert list(batch.config["depth"]) == depth
    for g in range(len(depth)):
        one = sparse.deep(problem.X, problem.y, depth=depth[g], init_scale=zeta[g], beta1=beta1[g], **kw)
        np.testing.assert_allclose(batch.b[g], one.b[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(batch.grad_ratio[g], one.grad_ratio[0], rtol=1e-10)


def test_stacked_problems_of_different_N_are_exact() -> None:
    """Zero rows appended by ``data.sparse.stack_problems`` change none of the deep iterates."""
    problems = [data.sparse.problem(20, 3, N, variance="1/N", seed=1, x_seed=1) for N in (6, 10, 15)]
    X, y, b_star = data.sparse.stack_problems(problems)
    kw = dict(alpha=0.05, init_scale=0.5, steps=150, seed=0, record_b=True, device="cpu")
    batch = sparse.deep(X, y, b_star=b_star, depth=[2, 3, 2], **kw)
    for g, (p, L) in enumerate(zip(problems, [2, 3, 2])):
        one = sparse.deep(p.X, p.y, b_star=p.b_star, depth=L, **kw)
        np.testing.assert_allclose(batch.b[g], one.b[0], rtol=1e-10, atol=1e-15)
        np.testing.assert_allclose(batch.train_error[g], one.train_error[0], rtol=1e-10)


def test_update_direction_against_autograd(problem) -> None:
    r"""(B - step(B))/alpha is the gradient of f(B) = 1/2||X b - y||^2 + beta2/2 sum ||B_k||^2 +
    beta1 sum ||B_k||_1 (autograd's |x|' = sign x, 0 at 0 as h), padding layers excluded."""
    rng = np.random.RandomState(0)
    L, n = 4, problem.n
    B = rng.randn(2, L, n) * 0.5
    B[1, 3] = 1.0  # configuration 1 has depth 3: its fourth factor is padding
    B[0, 1, :3] = 0.0  # sign(0) = 0
    active = np.ones((2, L, 1))
    active[1, 3] = 0.0
    beta1, beta2, alpha = 0.3, 0.2, 0.01
    X, y = torch.as_tensor(problem.X), torch.as_tensor(problem.y)
    col = lambda v: torch.full((2, 1), v, dtype=torch.float64)  # noqa: E731
    new = sparse.deep_step(torch.as_tensor(B), X, y, col(alpha), col(beta1), col(beta2), torch.as_tensor(active))
    direction = (B - new.numpy()) / alpha
    for g, depth in ((0, 4), (1, 3)):
        def f(*factors):
            b = factors[0]
            for F in factors[1:]:
                b = b * F
            return (0.5 * torch.sum((X @ b - y) ** 2) + beta2 / 2 * sum(torch.sum(F**2) for F in factors)
                    + beta1 * sum(torch.sum(torch.abs(F)) for F in factors))
        grads = theory.matrix.autograd_gradients(f, *B[g, :depth])
        np.testing.assert_allclose(direction[g, :depth], np.stack(grads), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(new.numpy()[1, 3], 1.0)  # padding never moves


def test_diagonal_network_is_the_deep_factorization_with_diagonal_factors() -> None:
    """The authors' identity initialisation keeps the deep matrix factorization diagonal when the
    sensing reads only the diagonal: it is then the diagonal network with constant factors (the
    nuclear subgradient of a diagonal matrix is diag(sign))."""
    n, N = 6, 4
    p = data.sparse.problem(n, 2, N, variance="1/N", seed=3)
    sensing = np.zeros((N, n * n))
    sensing[:, np.arange(n) * (n + 1)] = p.X  # column-major vec: the diagonal entries
    kw = dict(alpha=0.05, beta2=1e-2, steps=100, init_scale=0.8, record_A=True, device="cpu")
    deep_matrix = matrix.deep(sensing, p.y, (n, n), depth=3, beta_star=1e-3, init="identity", **kw)
    kw["record_b"] = kw.pop("record_A")
    diagonal = sparse.deep(p.X, p.y, depth=3, beta1=1e-3, init="constant", **kw)
    A = deep_matrix.A[0]
    np.testing.assert_allclose(A - np.einsum("tii->ti", A)[:, :, None] * np.eye(n), 0.0, atol=1e-14)
    np.testing.assert_allclose(np.einsum("tii->ti", A), diagonal.b[0], rtol=1e-10, atol=1e-15)


def test_constant_initialisation_cannot_make_negative_entries_for_even_depth(problem) -> None:
    """Spec §3.6: identical factors stay identical (beta1 = beta2 = 0), so b = u^L >= 0 for even L,
    while the paper's random factors reach the negative entries of b*."""
    assert (problem.b_star < 0).any()
    kw = dict(b_star=problem.b_star, alpha=0.1, init_scale=0.5, steps=3000, record_b=True, device="cpu")
    const = sparse.deep(problem.X, problem.y, depth=2, init="constant", **kw)
    assert (const.b[0] >= 0).all()
    rand = sparse.deep(problem.X, problem.y, depth=2, init="random", **kw)
    negative = problem.b_star < 0
    assert (rand.b_final[0][negative] < 0).all() and (const.b_final[0][negative] > 0).all()
    # the factors stay identical, step after step
    B = torch.as_tensor(sparse.deep_factors(problem.n, 4, 0.5, init="constant"))
    assert (B == 0.5).all()
    X, y, one = torch.as_tensor(problem.X), torch.as_tensor(problem.y), torch.ones(1, 1, dtype=torch.float64)
    for _ in range(200):
        B = sparse.deep_step(B, X, y, 0.1 * one, 0 * one, None, one[:, :, None])
    assert (B == B[:, :1]).all() and B.std() > 0


def test_deep_factors_draws() -> None:
    B = sparse.deep_factors(50, [1, 3], [2.0, 0.5], seed=5)
    assert B.shape == (2, 3, 50)
    first = sparse.initial_point(50, 1.0, seed=5)
    np.testing.assert_array_equal(B[0, 0], 2.0 * first)  # layer 1 is the shallow kernels' draw
    np.testing.assert_array_equal(B[0, 1:], 1.0)  # padding
    assert abs(np.std(B[1] / 0.5) * np.sqrt(50) - 1) < 0.2  # N(0, 1/n) entries
    assert not np.allclose(B[1, 0], B[1, 1])  # independent layers


@pytest.mark.parametrize("call, message", [
    (lambda p: sparse.deep(p.X, p.y, depth=0, alpha=0.1, steps=5), r"depth must be an integer in \[1, inf\), got 0"),
    (lambda p: sparse.deep(p.X, p.y, depth=1.5, alpha=0.1, steps=5), r"depth must be an integer in \[1, inf\), got 1.5"),
    (lambda p: sparse.deep(p.X, p.y, depth=[], alpha=0.1, steps=5), r"depth must be an integer >= 1 or a non-empty"),
    (lambda p: sparse.deep(p.X, p.y, depth=[1, 2], alpha=[0.1, 0.1, 0.1], steps=5), r"depth must be a number or one per"),
    (lambda p: sparse.deep(p.X, p.y, depth=[1, 2], alpha=-1.0, steps=5), r"alpha must be in \(0.0, inf\), got -1.0"),
    (lambda p: sparse.deep(p.X, p.y, depth=2, alpha=0.1, steps=0), r"steps must be an integer"),
    (lambda p: sparse.deep(p.X, p.y, depth=2, alpha=0.1, beta1=-1.0, steps=5), r"beta1 must be"),
    (lambda p: sparse.deep(p.X, p.y, depth=2, alpha=0.1, steps=5, init="identity"), r"init must be one of"),
    (lambda p: sparse.deep(p.X, p.y, depth=2, alpha=10.0, steps=5), r"alpha must be in \(0, 2/\(lambda_max"),
    (lambda p: sparse.deep(p.X, p.y[:-1], depth=2, alpha=0.1, steps=5), r"y must have shape"),
    (lambda p: sparse.deep(p.X, 0 * p.y, depth=2, alpha=0.1, steps=5), r"y must be nonzero"),
    (lambda p: sparse.deep_factors(0, 2), r"n must be an integer in \[1, inf\), got 0"),
    (lambda p: sparse.deep_factors(10, 2, -1.0), r"init_scale must be"),
    (lambda p: sparse.deep_factors(10, 2, seed=-1), r"seed must be an integer in \[0, 2\*\*32 - 1\]"),
])
def test_bad_inputs_are_refused(problem, call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(problem)
