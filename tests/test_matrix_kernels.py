"""The matrix-factorization update rules (grokkit.kernels.matrix) against plain numpy."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from grokkit.kernels import matrix as mk

N1, N2 = 6, 5


def low_rank(rng: np.random.RandomState, r: int = 2) -> np.ndarray:
    return rng.randn(N1, r) @ rng.randn(r, N2) / np.sqrt(r)


def completion(rng: np.random.RandomState, N: int = 20) -> np.ndarray:
    mask = np.zeros(N1 * N2, dtype=bool)
    mask[rng.choice(N1 * N2, N, replace=False)] = True
    return mask.reshape(N1, N2)


def col(values) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values, dtype=np.float64))[:, None, None]


def operators(rng: np.random.RandomState):
    """(completion, sensing) operators with their explicit (N, n1 n2) matrices on column-major vec."""
    mask = completion(rng)
    rows = np.flatnonzero(mask.ravel())  # row-major order, as A[mask]
    explicit_c = np.zeros((rows.size, N1 * N2))
    for k, flat in enumerate(rows):
        i, j = divmod(flat, N2)
        explicit_c[k, j * N1 + i] = 1.0  # column-major position of entry (i, j)
    X = rng.randn(12, N1 * N2) / np.sqrt(12)
    return [(mk.Measurements("completion", (N1, N2), mask=torch.as_tensor(mask)), explicit_c),
            (mk.Measurements("sensing", (N1, N2), X=torch.as_tensor(X)), X)]


def vec(A: np.ndarray) -> np.ndarray:
    return A.reshape(-1, order="F")


def test_operator_and_adjoint_match_the_explicit_matrix() -> None:
    rng = np.random.RandomState(0)
    for op, explicit in operators(rng):
        A = rng.randn(3, N1, N2)
        r = rng.randn(3, op.N)
        out = op(torch.as_tensor(A)).numpy()
        np.testing.assert_allclose(out, np.stack([explicit @ vec(a) for a in A]), atol=1e-13)
        back = op.adjoint(torch.as_tensor(r)).numpy()
        np.testing.assert_allclose(np.stack([vec(b) for b in back]), r @ explicit, atol=1e-13)
        # <X(A), r> = <A, X*(r)>
        np.testing.assert_allclose((out * r).sum(axis=1), (A * back).sum(axis=(1, 2)), atol=1e-12)


def test_completion_reads_the_mask_as_numpy_does() -> None:
    rng = np.random.RandomState(1)
    mask, A = completion(rng), rng.randn(N1, N2)
    op = mk.Measurements("completion", (N1, N2), mask=torch.as_tensor(mask))
    np.testing.assert_array_equal(op(torch.as_tensor(A[None]))[0].numpy(), A[mask])


def numpy_h(A: np.ndarray) -> np.ndarray:
    U, _, Vt = np.linalg.svd(A, full_matrices=False)
    return U @ Vt


@pytest.mark.parametrize("method", ["subgradient", "proximal"])
def test_steps_equal_a_numpy_loop(method: str) -> None:
    """300 steps of every configuration of a (alpha, beta*, beta2) grid, against a numpy loop
    over configurations doing the same update."""
    rng = np.random.RandomState(2)
    A_star = low_rank(rng)
    alphas, betas, ridges = [0.1, 0.3, 0.2], [1e-3, 1e-2, 0.05], [0.0, 0.0, 0.1]
    for op, explicit in operators(rng):
        y = explicit @ vec(A_star)
        A0 = 1e-3 * rng.randn(3, N1, N2)
        step = mk.subgradient_step if method == "subgradient" else mk.proximal_step
        A = torch.as_tensor(A0)
        for _ in range(300):
            A = step(A, op, torch.as_tensor(y), col(alphas), col(betas), col(ridges))
        for g, (alpha, beta, ridge) in enumerate(zip(alphas, betas, ridges)):
            B = A0[g].copy()
            for _ in range(300):
                grad = (explicit.T @ (explicit @ vec(B) - y)).reshape(N2, N1).T + ridge * B
                if method == "subgradient":
                    B = B - alpha * (grad + beta * numpy_h(B))
                else:
                    U, S, Vt = np.linalg.svd(B - alpha * grad, full_matrices=False)
                    B = (U * np.maximum(S - alpha * beta, 0)) @ Vt
            np.testing.assert_allclose(A[g].numpy(), B, atol=1e-10, err_msg=f"{op.kind} config {g}")


def test_batched_equals_one_configuration_at_a_time() -> None:
    rng = np.random.RandomState(3)
    A_star = low_rank(rng)
    op, explicit = operators(rng)[1]
    y = torch.as_tensor(explicit @ vec(A_star))
    A0 = torch.as_tensor(1e-3 * rng.randn(4, N1, N2))
    alphas, betas = [0.05, 0.1, 0.2, 0.3], [1e-4, 1e-3, 1e-2, 1e-1]
    A = A0
    for _ in range(200):
        A = mk.subgradient_step(A, op, y, col(alphas), col(betas), None)
    for g in range(4):
        B = A0[g:g + 1]
        for _ in range(200):
            B = mk.subgradient_step(B, op, y, col(alphas[g:g + 1]), col(betas[g:g + 1]), None)
        np.testing.assert_allclose(A[g].numpy(), B[0].numpy(), atol=1e-12)


def test_svt_is_the_proximal_map_of_the_nuclear_norm() -> None:
    """P = SVT_gamma(Z) iff (Z - P)/gamma is a subgradient of ||.||_* at P: spectral norm <= 1
    and <(Z - P)/gamma, P> = ||P||_*."""
    rng = np.random.RandomState(4)
    Z = torch.as_tensor(rng.randn(3, N1, N2))
    gamma = col([0.1, 1.0, 2.5])
    P = mk.singular_value_threshold(Z, gamma)
    W = (Z - P) / gamma
    assert (torch.linalg.matrix_norm(W, ord=2) <= 1 + 1e-12).all()
    nuclear = torch.linalg.matrix_norm(P, ord="nuc")
    torch.testing.assert_close((W * P).sum(dim=(1, 2)), nuclear, atol=1e-12, rtol=0)
    assert torch.linalg.matrix_rank(P[2]) < torch.linalg.matrix_rank(P[0])  # thresholding lowers the rank


def test_projected_iterates_stay_feasible() -> None:
    rng = np.random.RandomState(5)
    A_star = low_rank(rng)
    for op, explicit in operators(rng):
        y = torch.as_tensor(explicit @ vec(A_star))
        project = mk.affine_projection(op, y)
        A = project(torch.as_tensor(rng.randn(2, N1, N2)))
        for _ in range(100):
            A = mk.projected_subgradient_step(A, op, y, col([0.1, 0.05]), col([1e-2, 1e-1]), None, project)
            assert (op(A) - y).abs().max() < 1e-12, op.kind


def test_beta_star_zero_converges_to_the_least_squares_solution() -> None:
    """With beta* = beta2 = 0, gradient descent from 0 converges to the minimum-norm solution."""
    rng = np.random.RandomState(6)
    A_star = low_rank(rng)
    op, explicit = operators(rng)[1]
    y = explicit @ vec(A_star)
    A_hat = (np.linalg.pinv(explicit) @ y).reshape(N2, N1).T
    A = torch.zeros(1, N1, N2, dtype=torch.float64)
    alpha = 1.0 / np.linalg.eigvalsh(explicit @ explicit.T).max()
    for _ in range(3000):
        A = A - alpha * mk.data_gradient(A, op, torch.as_tensor(y), None)
    np.testing.assert_allclose(A[0].numpy(), A_hat, atol=1e-9)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kind": "tensor"}, "kind must be one of"),
    ({"kind": "completion"}, "mask must be a boolean tensor of shape (6, 5)"),
    ({"kind": "completion", "mask": torch.ones(5, 6, dtype=torch.bool)}, "got torch.bool of shape (5, 6)"),
    ({"kind": "completion", "mask": torch.ones(6, 5)}, "mask must be a boolean tensor"),
    ({"kind": "completion", "mask": torch.zeros(6, 5, dtype=torch.bool)}, "N >= 1"),
    ({"kind": "sensing", "X": torch.ones(4, 29)}, "X must have shape (N, 30)"),
])
def test_bad_operators_are_refused(kwargs: dict, message: str) -> None:
    kind = kwargs.pop("kind")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        mk.Measurements(kind, (N1, N2), **kwargs)


@pytest.mark.parametrize("kind", mk.KINDS)
def test_operator_reads_the_problems_of_grokkit_data(kind: str) -> None:
    """The kernels' operator and grokkit.data agree on the measurements and on A_hat."""
    from grokkit import data

    problem = data.make_matrix_problem(N1, N2, 2, 12, kind=kind, seed=0)
    op = (mk.Measurements(kind, (N1, N2), mask=torch.as_tensor(problem.mask)) if kind == "completion"
          else mk.Measurements(kind, (N1, N2), X=torch.as_tensor(problem.X)))
    A_star = torch.as_tensor(problem.A_star)[None]
    np.testing.assert_allclose(op(A_star)[0].numpy(), problem.y_star, atol=1e-13)
    A_hat = torch.as_tensor(problem.A_hat)[None]
    np.testing.assert_allclose(op(A_hat)[0].numpy(), problem.y, atol=1e-10)  # A_hat fits the measurements


def test_deep_step_of_depth_one_is_subgradient_descent() -> None:
    rng = np.random.RandomState(7)
    op, explicit = operators(rng)[0]
    y = torch.as_tensor(explicit @ vec(low_rank(rng)))
    (A,) = mk.deep_init(N1, N2, 1, 0.1, G=2, seed=3)
    hyper = col([0.1, 0.2]), col([1e-2, 1e-1]), col([0.0, 0.05])
    (deep,) = mk.deep_step([A], op, y, *hyper)
    torch.testing.assert_close(deep, mk.subgradient_step(A, op, y, *hyper), atol=1e-15, rtol=0)


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_deep_step_is_gradient_descent_on_the_factors(depth: int) -> None:
    """With beta* = 0 the update is A_k - alpha * autograd gradient of
    1/2 ||X(A_1...A_L) - y||^2 + beta2/2 sum_k ||A_k||_F^2 (Lemma D.14)."""
    rng = np.random.RandomState(depth)
    for op, explicit in operators(rng):
        y = torch.as_tensor(explicit @ vec(low_rank(rng)))
        factors = mk.deep_init(N1, N2, depth, 1.0, G=2, seed=depth)
        alpha, beta2 = col([0.05, 0.02]), col([0.0, 0.3])
        stepped = mk.deep_step(factors, op, y, alpha, col([0.0, 0.0]), beta2)
        leaves = [F.clone().requires_grad_(True) for F in factors]
        loss = (0.5 * ((op(mk.product(leaves)) - y) ** 2).sum()
                + sum((0.5 * beta2 * F ** 2).sum() for F in leaves))
        grads = torch.autograd.grad(loss, leaves)
        for k, (F, new, grad) in enumerate(zip(factors, stepped, grads)):
            torch.testing.assert_close(new, F - alpha * grad, atol=1e-13, rtol=0, msg=f"{op.kind} factor {k}")


def test_deep_step_with_the_nuclear_term_equals_a_numpy_loop() -> None:
    rng = np.random.RandomState(8)
    op, explicit = operators(rng)[1]
    y = explicit @ vec(low_rank(rng))
    factors = mk.deep_init(N1, N2, 3, 0.5, G=1, seed=1)
    F_np = [F[0].numpy().copy() for F in factors]
    for _ in range(50):
        factors = mk.deep_step(factors, op, torch.as_tensor(y), col([0.05]), col([0.01]), col([0.1]))
        A = F_np[0] @ F_np[1] @ F_np[2]
        G = (explicit.T @ (explicit @ vec(A) - y)).reshape(N2, N1).T
        grads = [G @ (F_np[1] @ F_np[2]).T, F_np[0].T @ G @ F_np[2].T, (F_np[0] @ F_np[1]).T @ G]
        F_np = [F - 0.05 * (g + 0.01 * numpy_h(F) + 0.1 * F) for F, g in zip(F_np, grads)]
    for F, B in zip(factors, F_np):
        np.testing.assert_allclose(F[0].numpy(), B, atol=1e-10)


def test_deep_init() -> None:
    factors = mk.deep_init(4, 7, 3, 2.0, G=2, init="identity")
    assert [tuple(F.shape) for F in factors] == [(2, 4, 7), (2, 7, 7), (2, 7, 7)]
    torch.testing.assert_close(mk.product(factors)[0], 8.0 * torch.eye(4, 7, dtype=torch.float64))
    a, b = mk.deep_init(30, 40, 2, 1.0, seed=5), mk.deep_init(30, 40, 2, 1.0, seed=5)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], mk.deep_init(30, 40, 2, 1.0, seed=6)[0])
    for F in a:  # zeta N(0, 1/(entries of the factor))
        assert abs(F.var().item() * F[0].numel() - 1.0) < 0.1
    with pytest.raises(ValueError, match="depth must be"):
        mk.deep_init(4, 7, 0, 1.0)
    with pytest.raises(ValueError, match="init must be one of"):
        mk.deep_init(4, 7, 2, 1.0, init="orthogonal")
