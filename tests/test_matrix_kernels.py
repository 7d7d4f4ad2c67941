"""The matrix-factorization update rules (grokkit.kernels.matrix) against plain numpy."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from grokkit.kernels import fused
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
        A = op.project(torch.as_tensor(rng.randn(2, N1, N2)), y)
        for _ in range(100):
            A = mk.projected_subgradient_step(A, op, y, col([0.1, 0.05]), col([1e-2, 1e-1]), None)
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

    problem = data.matrix.problem(N1, N2, 2, 12, kind=kind, seed=0)
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


# --- the kernels: the steps run in the shared loop ----------------------------------------------

def small_problem(kind: str, seed: int = 0):
    from grokkit import data

    return data.matrix.problem(N1, N2, 2, 20 if kind == "completion" else 24, kind=kind, seed=seed)


def operator_of(problem):
    return problem.mask if problem.kind == "completion" else problem.X


@pytest.mark.parametrize("kind", mk.KINDS)
@pytest.mark.parametrize("method", list(mk.METHODS))
def test_kernel_records_the_steps_it_takes(kind: str, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's final iterate is the step function iterated, and every record is the
    curves of the recorded iterate (checked with numpy). The kernel runs the PyTorch steps: with
    beta* = 0.1 the dynamics amplify rounding (a 1e-18 change of A grows to 1e-3), so only the
    same LAPACK calls agree to 1e-12; the fused CPU steps are checked in tests/test_speed.py."""
    monkeypatch.setattr(fused, "matrix_usable", lambda *problem: False)
    p = small_problem(kind)
    config = {"alpha": [0.1, 0.3], "beta_star": [1e-2, 1e-1], "beta2": [0.0, 0.05]}
    traj = mk.METHODS[method](operator_of(p), p.y, (N1, N2), **config, steps=1500, A_star=p.A_star,
                              init_scale=0.1, seed=4, record_A=True, stop_periodic=False, device="cpu",
                              progress=False)
    op = (mk.Measurements(kind, (N1, N2), mask=torch.as_tensor(p.mask)) if kind == "completion"
          else mk.Measurements(kind, (N1, N2), X=torch.as_tensor(p.X)))
    step = {"subgradient": mk.subgradient_step, "proximal": mk.proximal_step,
            "projected_subgradient": mk.projected_subgradient_step}[method]
    A = 0.1 * mk.deep_init(N1, N2, 1, 1.0, G=2, seed=4)[0]
    for _ in range(1500):
        A = step(A, op, torch.as_tensor(p.y), col(config["alpha"]), col(config["beta_star"]), col(config["beta2"]))
    np.testing.assert_allclose(traj.A_final, A.numpy(), atol=1e-12)
    np.testing.assert_allclose(traj.A[:, -1], traj.A_final, atol=0)
    for g in range(2):
        for j in (0, 10, len(traj.steps) - 1):
            B = traj.A[g, j]
            sv = np.linalg.svd(B, compute_uv=False)
            np.testing.assert_allclose(traj.singular_values[g, j], sv, atol=1e-12)
            np.testing.assert_allclose(traj.nuclear[g, j], sv.sum(), rtol=1e-12)
            np.testing.assert_allclose(traj.train_error[g, j],  # rounding noise once the data are fitted
                                       np.linalg.norm(p.apply(B) - p.y) / np.linalg.norm(p.y), rtol=1e-10,
                                       atol=1e-14)
            np.testing.assert_allclose(traj.test_error[g, j],
                                       np.linalg.norm(B - p.A_star) / np.linalg.norm(p.A_star), rtol=1e-12)
            grad = (p.X.T @ (p.X @ B.reshape(-1, order="F") - p.y)).reshape(N2, N1).T if kind == "sensing" \
                else np.where(p.mask, B - p.A_star, 0.0)
            grad = grad + config["beta2"][g] * B
            if np.linalg.norm(grad) < 1e-8:  # an exact fit (projected, beta2 = 0): the ratio divides rounding noise
                continue
            np.testing.assert_allclose(traj.grad_ratio[g, j],
                                       config["beta_star"][g] * np.sqrt(min(N1, N2)) / np.linalg.norm(grad),
                                       rtol=1e-9)


def test_batched_grid_equals_one_configuration_at_a_time() -> None:
    p = small_problem("completion")
    grid = {"alpha": np.array([0.1, 0.5, 1.0]), "beta_star": np.array([1e-3, 1e-2, 1e-1])}
    batched = mk.subgradient(p.mask, p.y, (N1, N2), **grid, steps=3000, A_star=p.A_star, device="cpu",
                             progress=False)
    for g in range(3):
        one = mk.subgradient(p.mask, p.y, (N1, N2), alpha=grid["alpha"][g], beta_star=grid["beta_star"][g],
                             steps=3000, A_star=p.A_star, device="cpu", progress=False)
        np.testing.assert_allclose(batched.A_final[g], one.A_final[0], atol=1e-12)
        np.testing.assert_allclose(batched.test_error[g], one.test_error[0], rtol=1e-10)


def test_one_mask_per_configuration() -> None:
    """A tau or N sweep changes the mask per configuration: (G, n1, n2) masks and (G, N) y."""
    problems = [small_problem("completion", seed) for seed in (1, 2)]
    masks = np.stack([q.mask for q in problems])
    ys = np.stack([q.y for q in problems])
    stars = np.stack([q.A_star for q in problems])
    both = mk.proximal(masks, ys, (N1, N2), alpha=0.5, beta_star=1e-2, steps=2000, A_star=stars, device="cpu",
                       progress=False)
    for g, q in enumerate(problems):
        one = mk.proximal(q.mask, q.y, (N1, N2), alpha=0.5, beta_star=1e-2, steps=2000, A_star=q.A_star,
                          device="cpu", progress=False)
        np.testing.assert_allclose(both.A_final[g], one.A_final[0], atol=1e-12)


def test_measurements_select_keeps_the_configurations_asked_for() -> None:
    rng = np.random.RandomState(9)
    masks = torch.as_tensor(np.stack([completion(rng) for _ in range(3)]))
    X = torch.as_tensor(rng.randn(3, 7, N1 * N2))
    A = torch.as_tensor(rng.randn(3, N1, N2))
    keep = torch.tensor([True, False, True])
    for op in (mk.Measurements("completion", (N1, N2), mask=masks), mk.Measurements("sensing", (N1, N2), X=X)):
        assert op.batched
        torch.testing.assert_close(op.select(keep)(A[keep]), op(A)[keep], atol=0, rtol=0)


def test_beta_star_zero_from_zero_reaches_the_least_squares_solution() -> None:
    p = small_problem("completion")
    traj = mk.subgradient(p.mask, p.y, (N1, N2), alpha=1.0, beta_star=0.0, steps=100, init_scale=0.0,
                          device="cpu", progress=False)
    np.testing.assert_allclose(traj.A_final[0], p.A_hat, atol=1e-14)


def test_proximal_gradient_reaches_the_convex_solution() -> None:
    """SVT converges to argmin f, which cvxpy computes (baselines.nuclear_norm_regularized)."""
    from grokkit import baselines

    p = small_problem("sensing")
    beta_star, beta2 = 0.05, 0.01
    traj = mk.proximal(p.X, p.y, (N1, N2), alpha=0.5 / p.lambda_max, beta_star=beta_star, beta2=beta2,
                       steps=20000, device="cpu", progress=False)
    solution = baselines.nuclear_norm_regularized(p.X, p.y, (N1, N2), beta_star, beta2)
    np.testing.assert_allclose(traj.A_final[0], solution.A, atol=1e-5)


def test_projected_iterates_fit_the_data_at_every_record() -> None:
    p = small_problem("sensing")
    traj = mk.projected_subgradient(p.X, p.y, (N1, N2), alpha=0.1, beta_star=1e-2, steps=3000, device="cpu",
                                    progress=False)
    assert traj.train_error[:, 0].min() > 0.5  # the initial point is not projected
    assert traj.train_error[:, 1:].max() < 1e-12


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: mk.subgradient(p.mask, p.y, (N1, N2), alpha=2.0, beta_star=1e-3, steps=10),
     r"alpha must be in \(0, 2/\(lambda_max \+ beta2\)\) = \(0, 2\) for stability, got 2"),
    (lambda p: mk.subgradient(p.mask, p.y, (N1, N2), alpha=1.5, beta_star=1e-3, beta2=0.5, steps=10),
     r"= \(0, 1.33333\) for stability, got 1.5"),
    (lambda p: mk.subgradient(p.mask, p.y, (N1, N2), alpha=0.1, beta_star=-1.0, steps=10),
     r"beta_star must be in \[0.0, inf\), got -1.0"),
    (lambda p: mk.subgradient(p.mask.T, p.y, (N1, N2), alpha=0.1, beta_star=1e-3, steps=10),
     r"mask must be a boolean tensor of shape \(6, 5\)"),
    (lambda p: mk.subgradient(p.mask, p.y[:-1], (N1, N2), alpha=0.1, beta_star=1e-3, steps=10),
     r"y must have N = 20 entries"),
    (lambda p: mk.subgradient(p.mask, p.y, N1, alpha=0.1, beta_star=1e-3, steps=10),
     r"shape must be a pair \(n1, n2\), got 6"),
    (lambda p: mk.subgradient(p.mask, p.y, (N1, N2), alpha=0.1, beta_star=1e-3, steps=10, init="ones"),
     r"init must be one of"),
    (lambda p: mk.subgradient(p.mask, np.zeros(20), (N1, N2), alpha=0.1, beta_star=1e-3, steps=10),
     r"y must be nonzero"),
    (lambda p: mk.subgradient(p.mask, p.y, (N1, N2), alpha=0.1, beta_star=1e-3, steps=0),
     r"steps must be"),
    (lambda p: mk.projected_subgradient(np.ones((40, 30)), np.ones(40), (N1, N2), alpha=1e-3, beta_star=1e-3,
                                        steps=10),
     r"projected_subgradient needs rank\(X\) = N <= n1\*n2"),
])
def test_bad_input_is_refused(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(small_problem("completion"))


def test_a_fixed_point_stops_alone(monkeypatch: pytest.MonkeyPatch):
    """One configuration reaches an exact fixed point (β* = 0, β₂ > 0: a contraction) while the
    other keeps moving: the fixed one is stopped, its records filled from the fixed point, as if
    it had run on (regression: the loop asked the family to evaluate zero cycling rows). On the
    PyTorch steps: the fused CPU steps round differently and bring the other one to an exact
    2-cycle at step 252 (tests/test_speed.py checks the periodic stop there)."""
    from grokkit import data

    monkeypatch.setattr(fused, "matrix_usable", lambda *problem: False)

    problem = data.matrix.problem(4, 4, 1, 10, seed=3)
    kwargs = dict(A_star=problem.A_star, alpha=0.5, beta_star=[0.0, 1e-2], beta2=0.5, steps=3000,
                  device="cpu")
    stopped = mk.subgradient.__wrapped__(problem.mask, problem.y, (4, 4), **kwargs)
    full = mk.subgradient.__wrapped__(problem.mask, problem.y, (4, 4), stop_periodic=False, **kwargs)
    assert stopped.stopped_at[0] > 0 and stopped.stopped_at[1] == -1
    for name in ("train_error", "test_error", "nuclear"):
        np.testing.assert_allclose(getattr(stopped, name), getattr(full, name), rtol=0, atol=1e-12)
