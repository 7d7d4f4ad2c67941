"""Batched network training (grokkit.kernels.nets) against one model per configuration trained
with torch.optim.Adam, the recorded curves against direct computations, and bad input."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import grokkit as gk
from grokkit.kernels import nets

ALPHA = [1e-3, 1e-2, 3e-3]
BETA = [1e-3, 1e-4, 1e-2]
# The nuclear norm's gradient UV^T is ill-conditioned at a singular value near 0: there the
# direction u_i v_i^T turns with rounding, and Adam, which normalises every coordinate, amplifies
# the difference (beta = 1e-2 drives a singular value of the modular-addition MLP to ~2e-4 within
# 200 steps, after which the batched and single runs part, as the matrix chapter's SVD-based
# kernels do). The comparison holds where every singular value stays clear of 0 (checked below).
BETA_NUCLEAR = [1e-3, 1e-4, 2e-3]


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def teacher():
    return gk.data.nets.teacher_student(d=8, width=20, c=2, n_train=40, n_test=60, seed=1)


@pytest.fixture(scope="module")
def addition():
    return gk.data.nets.modular_addition(7, 0.5, seed=2)


@pytest.fixture(scope="module")
def sequences():
    return gk.data.nets.modular_addition(7, 0.5, encoding="sequence", seed=2)


def one_at_a_time(task, model, penalty, alpha, beta, steps, batch_size, seed):
    """The reference: a copy of ``model`` trained alone with torch.optim.Adam on the same batches."""
    model = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=alpha)
    batches = nets.Batches(task.X_train.shape[0], batch_size, seed)
    for _ in range(steps):
        idx = batches.next()
        x, y = (task.X_train, task.y_train) if idx is None else (task.X_train[idx], task.y_train[idx])
        params = dict(model.named_parameters())
        if penalty.startswith("sobolev"):
            J = task.J_train if idx is None else task.J_train[idx]
            jac = torch.func.vmap(torch.func.jacrev(lambda xi: model(xi[None])[0]))(x)
            omega = nets.penalty(penalty, params, jac, J)
        else:
            omega = nets.penalty(penalty, params)
        objective = nets.loss(task.kind, model(x), y) + beta * omega
        opt.zero_grad()
        objective.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]).double().numpy()


def assert_batched_equals_single(task, model, penalty, steps, batch_size):
    beta = BETA_NUCLEAR if penalty == "nuclear" else BETA
    traj = nets.train(task, model, penalty, alpha=ALPHA, beta=beta, steps=steps, batch_size=batch_size, seed=3,
                      device="cpu", progress=False)
    assert not traj.diverged.any()
    for g, (a, b) in enumerate(zip(ALPHA, beta)):
        single = one_at_a_time(task, model, penalty, a, b, steps, batch_size, 3)
        if penalty == "nuclear":
            trained = copy.deepcopy(model)
            torch.nn.utils.vector_to_parameters(torch.as_tensor(single, dtype=torch.float32), trained.parameters())
            assert min(float(torch.linalg.svdvals(w.detach()).min()) for w in trained.parameters() if w.dim() == 2) > 1e-2
        scale = np.abs(single).max()
        # float32 rounding: the batched and single computations sum in different orders
        np.testing.assert_allclose(traj.params_final[g], single, rtol=0, atol=2e-5 * scale)
        assert np.abs(traj.params_final[g] - model_params(model)).max() > 1e-3 * scale  # it trained


def model_params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).double().numpy()


@pytest.mark.parametrize("penalty", nets.PENALTIES)
def test_student_mlp_batched_equals_torch_adam(teacher, penalty):
    assert_batched_equals_single(teacher, nets.TwoLayerMLP(8, 20, 2, seed=0), penalty, steps=200, batch_size=16)


@pytest.mark.parametrize("penalty", nets.CLOSED_FORM)
def test_student_mlp_in_chunks_equals_torch_adam(teacher, monkeypatch, penalty):
    """On the CPU the closed-form updates run a chunk of configurations at a time: here one."""
    monkeypatch.setattr(nets, "CPU_CHUNK", 1)
    assert_batched_equals_single(teacher, nets.TwoLayerMLP(8, 20, 2, seed=0), penalty, steps=200, batch_size=16)


def test_student_mlp_classification_batched_equals_torch_adam(addition):
    assert_batched_equals_single(addition, nets.TwoLayerMLP(14, 16, 7, seed=0), "l1", steps=200, batch_size=10)


@pytest.mark.parametrize("kind", ["regression", "classification"])
def test_student_mlp_loss_gradients_are_autograds(kind):
    g = torch.Generator().manual_seed(4)
    model = nets.TwoLayerMLP(6, 9, 3, seed=1)
    params, _ = torch.func.stack_module_state([model] * 4)
    params = {k: (p + 0.3 * torch.randn(p.shape, generator=g)).double() for k, p in params.items()}
    x = torch.randn(11, 6, generator=g, dtype=torch.float64)
    if kind == "regression":
        y = torch.randn(11, 3, generator=g, dtype=torch.float64)
    else:
        y = torch.randint(3, (11,), generator=g)
    leaves = {k: p.clone().requires_grad_() for k, p in params.items()}
    expected = torch.autograd.grad(nets.loss(kind, model.logits(leaves, x), y).sum(), list(leaves.values()))
    got = nets.TwoLayerMLP.loss_gradients(params, x, y, kind)
    for (k, p), e in zip(params.items(), expected):
        torch.testing.assert_close(got[k], e, rtol=1e-12, atol=1e-14)
        assert e.abs().max() > 1e-3  # the hidden layer is partly active: the ReLU's mask matters


@pytest.mark.parametrize("penalty", nets.CLOSED_FORM)
def test_penalty_gradients_are_autograds(penalty):
    g = torch.Generator().manual_seed(5)
    w = torch.randn(3, 4, 5, generator=g, dtype=torch.float64)
    w[1] = 0.0  # a zero matrix: the l1 and l2 subgradients are 0 there, as autograd's
    w[2, 0, :2] = 0.0
    beta = torch.tensor([0.5, 2.0, 1e-3], dtype=torch.float64)
    leaf = w.clone().requires_grad_()
    expected, = torch.autograd.grad((beta * nets.penalty(penalty, {"w": leaf}, stacked=True)).sum(), leaf)
    start = torch.randn(w.shape, generator=g, dtype=torch.float64)
    got = nets.penalty_gradient_(penalty, w, start.clone(), beta)
    torch.testing.assert_close(got, start + expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("penalty", ["l1", "l2", "l2_squared", "nuclear"])
def test_matrix_product_mlp_batched_equals_torch_adam(addition, penalty):
    assert_batched_equals_single(addition, nets.MatrixProductMLP(7, 16, seed=0), penalty, steps=200, batch_size=10)


@pytest.mark.parametrize("penalty", ["l1", "l2", "l2_squared", "nuclear"])
def test_lstm_batched_equals_torch_adam(sequences, penalty):
    assert_batched_equals_single(sequences, nets.LSTMClassifier(9, 7, 6, 8, seed=0), penalty, steps=150,
                                 batch_size=None)



SEED_CASES = {  # (task of a seed, model of a seed, penalty, batch size, steps)
    "student-l1": (lambda s: gk.data.nets.teacher_student(8, 20, 2, 24, 30, seed=s),
                   lambda s: nets.TwoLayerMLP(8, 20, 2, seed=s), "l1", 8, 60),
    "student-sobolev": (lambda s: gk.data.nets.teacher_student(6, 10, 2, 12, 20, seed=s),
                        lambda s: nets.TwoLayerMLP(6, 10, 2, seed=s), "sobolev", None, 40),
    "student-nuclear": (lambda s: gk.data.nets.teacher_student(8, 20, 2, 24, 30, seed=s),
                        lambda s: nets.TwoLayerMLP(8, 20, 2, seed=s), "nuclear", None, 40),
    "digits-l2": (lambda s: gk.data.nets.modular_addition(7, 0.5, seed=s),
                  lambda s: nets.TwoLayerMLP(14, 16, 7, seed=s), "l2", 10, 60),
    "mlp-l2": (lambda s: gk.data.nets.modular_addition(7, 0.5, seed=s),
               lambda s: nets.MatrixProductMLP(7, 16, seed=s), "l2", 10, 60),
    "lstm-l1": (lambda s: gk.data.nets.modular_addition(7, 0.5, encoding="sequence", seed=s),
                lambda s: nets.LSTMClassifier(9, 7, 6, 8, seed=s), "l1", 10, 40),
}


@pytest.mark.parametrize("chunk", [None, 1])
@pytest.mark.parametrize("case", list(SEED_CASES))
def test_seeds_in_one_batch_equal_each_seed_alone(case, chunk, monkeypatch):
    """Three (task, model) seeds as extra configurations of one run: each configuration's
    weights and curves are those of its seed trained alone (float32 rounding apart), in chunks of
    one configuration too (the CPU's closed-form path)."""
    if chunk is not None:
        if SEED_CASES[case][2] not in nets.CLOSED_FORM or "student" not in case and "digits" not in case:
            pytest.skip("chunks only for the closed-form gradients")
        monkeypatch.setattr(nets, "CPU_CHUNK", chunk)
    make_task, make_model, penalty, batch_size, steps = SEED_CASES[case]
    seeds, alpha, beta = [0, 3, 5], [1e-2, 3e-3], [1e-3, 1e-4]
    kw = dict(alpha=alpha, beta=beta, steps=steps, batch_size=batch_size, seed=2, dense=5, per_decade=10,
              device="cpu", progress=False)
    both = nets.train([make_task(s) for s in seeds], [make_model(s) for s in seeds], penalty, **kw)
    assert both.config["k"].tolist() == [0, 0, 1, 1, 2, 2] and len(both) == 6
    np.testing.assert_array_equal(both.config["alpha"], np.tile(alpha, 3))
    for k, s in enumerate(seeds):
        alone = nets.train(make_task(s), make_model(s), penalty, **kw)
        rows = slice(2 * k, 2 * k + 2)
        scale = np.abs(alone.params_final).max()
        np.testing.assert_allclose(both.params_final[rows], alone.params_final, rtol=0, atol=2e-5 * scale)
        for curve in ("train_loss", "test_loss", "l1"):
            np.testing.assert_allclose(getattr(both, curve)[rows], getattr(alone, curve), rtol=2e-4, atol=1e-6)
        if alone.test_accuracy[0, 0] == alone.test_accuracy[0, 0]:  # classification
            assert np.abs(both.test_accuracy[rows] - alone.test_accuracy).max() <= 0.05
    assert not np.allclose(both.params_final[0], both.params_final[2])  # the seeds differ


def test_one_task_shared_by_the_models_of_several_seeds(teacher):
    models = [nets.TwoLayerMLP(8, 20, 2, seed=s) for s in (0, 1)]
    both = nets.train(teacher, models, "l2", alpha=1e-2, beta=1e-3, steps=20, device="cpu", progress=False)
    alone = nets.train(teacher, models[1], "l2", alpha=1e-2, beta=1e-3, steps=20, device="cpu", progress=False)
    np.testing.assert_allclose(both.params_final[1], alone.params_final[0], rtol=0, atol=1e-6)



def test_a_diverging_configuration_of_one_seed_leaves_the_others(teacher):
    """The loop drops a diverged configuration with its row of the stacked tasks (Setup.select)."""
    tasks = [gk.data.nets.teacher_student(8, 20, 2, 24, 30, seed=s) for s in (0, 1)]
    models = [nets.TwoLayerMLP(8, 20, 2, seed=s) for s in (0, 1)]
    with pytest.warns(RuntimeWarning, match=r"2 configuration\(s\) diverged"):
        both = nets.train(tasks, models, "l1", alpha=[1e30, 1e-2], beta=1e-3, steps=100, device="cpu",
                          progress=False)
    alone = nets.train(tasks[1], models[1], "l1", alpha=1e-2, beta=1e-3, steps=100, device="cpu", progress=False)
    assert both.diverged.tolist() == [True, False, True, False]  # alpha = 1e30 of each seed
    np.testing.assert_allclose(both.params_final[3], alone.params_final[0], rtol=0, atol=1e-6)

@pytest.mark.parametrize("tasks, models, message", [
    (lambda: [gk.data.nets.teacher_student(8, 20, 2, 24, 30, seed=s) for s in (0, 1)],
     lambda: [nets.TwoLayerMLP(8, 20, 2, seed=s) for s in (0, 1, 2)], r"lists of one length S .*2 task\(s\) and 3"),
    (lambda: [gk.data.nets.teacher_student(8, 20, 2, 24, 30), gk.data.nets.teacher_student(8, 20, 2, 25, 30)],
     lambda: nets.TwoLayerMLP(8, 20, 2), r"one kind and shape: task 1"),
    (lambda: gk.data.nets.teacher_student(8, 20, 2, 24, 30),
     lambda: [nets.TwoLayerMLP(8, 20, 2), nets.TwoLayerMLP(8, 21, 2)], r"one architecture: model 1"),
])
def test_seeds_of_different_shapes_are_refused(monkeypatch, tasks, models, message):
    monkeypatch.setattr(nets, "run", lambda *a, **k: pytest.fail("computed before refusing"))
    with pytest.raises(ValueError, match=message):
        nets.train(tasks(), models(), "l1", alpha=1e-3, beta=1e-3, steps=10)

def test_adam_step_is_torch_adam_with_a_rate_per_configuration():
    g = torch.Generator().manual_seed(0)
    p0, grads = torch.randn(3, 4, 5, generator=g), [torch.randn(3, 4, 5, generator=g) for _ in range(4)]
    lr = torch.tensor([1e-3, 1e-1, 0.5])
    p, m, v = p0.clone(), torch.zeros_like(p0), torch.zeros_like(p0)
    for t, gr in enumerate(grads, 1):
        nets.adam_step([p], [gr], [m], [v], t, lr)
    for k in range(3):
        q = p0[k].clone().requires_grad_()
        opt = torch.optim.Adam([q], lr=float(lr[k]))
        for gr in grads:
            q.grad = gr[k].clone()
            opt.step()
        torch.testing.assert_close(p[k], q.detach(), rtol=0, atol=1e-6)


def test_batches_are_seeded_epochs_of_one_permutation():
    a, b = nets.Batches(10, 4, seed=5), nets.Batches(10, 4, seed=5)
    first = [a.next() for _ in range(3)]
    assert [len(i) for i in first] == [4, 4, 2]  # the last batch is shorter (drop_last=False)
    assert sorted(torch.cat(first).tolist()) == list(range(10))  # one epoch visits every example once
    assert all(torch.equal(x, b.next()) for x in first)  # same seed, same order
    assert not torch.equal(torch.cat([a.next() for _ in range(3)]), torch.cat(first))  # a new epoch reshuffles
    assert nets.Batches(10, None, 0).next() is None and nets.Batches(10, 64, 0).next() is None  # full batch


def test_batches_drawn_epochs_ahead_keep_the_order():
    """On a GPU the permutations of many epochs are drawn at once: the same batches, in order."""
    one, many = nets.Batches(10, 4, seed=5, ahead=1), nets.Batches(10, 4, seed=5, ahead=7)
    for _ in range(40):  # 13 epochs and a bit: past a refill of the queue
        torch.testing.assert_close(many.next(), one.next(), rtol=0, atol=0)
    assert nets.Batches(10, 4, 0, device="cuda:0").ahead == 2**16 // 10  # no GPU needed to build it


def test_init_scale_multiplies_the_normal_initialisation():
    plain, large = nets.TwoLayerMLP(8, 20, 2, seed=3), nets.TwoLayerMLP(8, 20, 2, init_scale=8.0, seed=3)
    for a, b in zip(plain.parameters(), large.parameters()):
        torch.testing.assert_close(8.0 * a, b)


def test_penalties_against_numpy():
    g = torch.Generator().manual_seed(1)
    params = {"A": torch.randn(5, 3, generator=g, dtype=torch.float64),
              "B": torch.randn(2, 5, generator=g, dtype=torch.float64), "bias": torch.randn(5, dtype=torch.float64)}
    W = [params["A"].numpy(), params["B"].numpy()]  # the bias is not penalised
    expected = {"l1": sum(np.abs(w).sum() for w in W), "l2": sum(np.linalg.norm(w) for w in W),
                "l2_squared": sum((w ** 2).sum() for w in W),
                "nuclear": sum(np.linalg.svd(w, compute_uv=False).sum() for w in W)}
    for name, value in expected.items():
        assert float(nets.penalty(name, params)) == pytest.approx(value, rel=1e-12)
    J, J_star = (torch.randn(4, 2, 3, generator=g, dtype=torch.float64) for _ in range(2))
    d = (J - J_star).numpy()
    assert float(nets.penalty("sobolev", params, J, J_star)) == pytest.approx(np.sqrt((d ** 2).sum()), rel=1e-12)
    assert float(nets.penalty("sobolev_squared", params, J, J_star)) == pytest.approx((d ** 2).sum() / 4, rel=1e-12)


def test_curves_are_the_unregularised_losses_and_the_norms(addition):
    model = nets.MatrixProductMLP(7, 16, seed=4)
    traj = nets.train(addition, model, "l1", alpha=[1e-2, 1e-3], beta=[1e-4, 1e-3], steps=50, device="cpu",
                      progress=False)
    assert traj.steps[0] == 0 and traj.steps[-1] == 50 and traj.train_loss.shape == (2, traj.steps.size)
    for g in range(2):
        trained = copy.deepcopy(model)
        torch.nn.utils.vector_to_parameters(torch.as_tensor(traj.params_final[g], dtype=torch.float32),
                                            trained.parameters())
        with torch.no_grad():
            for X, y, loss_curve, acc in ((addition.X_train, addition.y_train, traj.train_loss, traj.train_accuracy),
                                          (addition.X_test, addition.y_test, traj.test_loss, traj.test_accuracy)):
                out = trained(X)
                assert loss_curve[g, -1] == pytest.approx(float(torch.nn.functional.cross_entropy(out, y)), rel=1e-5)
                assert acc[g, -1] == pytest.approx(float((out.argmax(1) == y).float().mean()), abs=1e-7)
        W = [p.detach().numpy().ravel() for p in trained.parameters() if p.dim() == 2]
        flat = np.concatenate(W)
        assert traj.l0[g, -1] == (np.abs(flat) > 1e-4).sum()
        assert traj.l1[g, -1] == pytest.approx(np.abs(flat).sum(), rel=1e-5)
        assert traj.l2[g, -1] == pytest.approx(np.linalg.norm(flat), rel=1e-5)
        nuclear = sum(np.linalg.svd(p.detach().numpy(), compute_uv=False).sum()
                      for p in trained.parameters() if p.dim() == 2)
        assert traj.nuclear[g, -1] == pytest.approx(nuclear, rel=1e-5)
    # at step 0 every configuration is the same model
    assert np.all(traj.train_loss[:, 0] == traj.train_loss[0, 0])
    np.testing.assert_allclose(traj.alpha_beta, [1e-6, 1e-6], rtol=1e-15)


def test_regression_records_no_accuracy(teacher):
    traj = nets.train(teacher, nets.TwoLayerMLP(8, 20, 2), "l2", alpha=1e-3, beta=0.0, steps=5, device="cpu",
                      progress=False)
    assert np.isnan(traj.train_accuracy).all() and np.isnan(traj.test_accuracy).all()
    assert np.isfinite(traj.train_loss).all()


def test_same_seed_same_numbers(teacher):
    runs = [nets.train(teacher, nets.TwoLayerMLP(8, 20, 2, seed=7), "nuclear", alpha=1e-2, beta=1e-3, steps=30,
                       batch_size=8, seed=1, device="cpu", progress=False) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].params_final, runs[1].params_final)
    np.testing.assert_array_equal(runs[0].test_loss, runs[1].test_loss)
    other = nets.train(teacher, nets.TwoLayerMLP(8, 20, 2, seed=7), "nuclear", alpha=1e-2, beta=1e-3, steps=30,
                       batch_size=8, seed=2, device="cpu", progress=False)
    assert not np.array_equal(other.params_final, runs[0].params_final)  # another batch order


def test_a_diverging_configuration_is_stopped_and_named(teacher):
    with pytest.warns(RuntimeWarning, match=r"1 configuration\(s\) diverged .*#1 \(alpha=1e\+30"):
        traj = nets.train(teacher, nets.TwoLayerMLP(8, 20, 2), "l1", alpha=[1e-3, 1e30], beta=1e-3, steps=200,
                          device="cpu", progress=False)
    assert traj.diverged.tolist() == [False, True]
    assert np.isfinite(traj.train_loss[0]).all() and np.isnan(traj.params_final[1]).all()


@pytest.mark.parametrize("call, message", [
    (lambda t: nets.train(t, nets.TwoLayerMLP(8, 20, 2), "l3", alpha=1e-3, beta=1e-3, steps=10),
     r"penalty must be one of 'l1', 'l2', 'l2_squared', 'nuclear', 'sobolev', 'sobolev_squared', got 'l3'"),
    (lambda t: nets.train(t, "mlp", "l1", alpha=1e-3, beta=1e-3, steps=10),
     r"model must be a torch.nn.Module .*got str"),
    (lambda t: nets.train(t, nets.TwoLayerMLP(8, 20, 2), "l1", alpha=0.0, beta=1e-3, steps=10),
     r"alpha must be in \(0.0, inf\), got 0.0"),
    (lambda t: nets.train(t, nets.TwoLayerMLP(8, 20, 2), "l1", alpha=[1e-3, -1.0], beta=1e-3, steps=10),
     r"alpha must be in \(0.0, inf\), got -1.0"),
    (lambda t: nets.train(t, nets.TwoLayerMLP(8, 20, 2), "l1", alpha=1e-3, beta=-1e-3, steps=10),
     r"beta must be in \[0.0, inf\), got -0.001"),
    (lambda t: nets.train(t, nets.TwoLayerMLP(8, 20, 2), "l1", alpha=1e-3, beta=1e-3, steps=0),
     r"steps must be an integer in \[1, "),
    (lambda t: nets.train(t, nets.TwoLayerMLP(8, 20, 2), "l1", alpha=1e-3, beta=1e-3, steps=10, batch_size=0),
     r"batch_size must be an integer in \[1, inf\), got 0"),
    (lambda t: nets.train(t, nets.TwoLayerMLP(8, 20, 2), "l1", alpha=1e-3, beta=1e-3, steps=10, device="tpu"),
     r"device must be one of 'auto', 'cpu', 'cuda'"),
    (lambda t: nets.train(gk.data.nets.modular_addition(5, 0.5), nets.TwoLayerMLP(10, 20, 5), "sobolev", alpha=1e-3,
                          beta=1e-3, steps=10),
     r"penalty 'sobolev' needs the teacher's Jacobians"),
    (lambda t: nets.train(object(), nets.TwoLayerMLP(8, 20, 2), "l1", alpha=1e-3, beta=1e-3, steps=10),
     r"task must be a grokkit.data.nets.Task, got object"),
    (lambda t: nets.TwoLayerMLP(8, 0, 2), r"width must be an integer in \[1, inf\), got 0"),
    (lambda t: nets.TwoLayerMLP(8, 4, 2, init_scale=0.0), r"init_scale must be in \(0.0, inf\), got 0.0"),
    (lambda t: nets.MatrixProductMLP(1), r"p must be an integer in \[2, inf\), got 1"),
    (lambda t: nets.MatrixProductMLP(7, 10), r"d must be a perfect square .*got 10"),
    (lambda t: nets.LSTMClassifier(9, 7, hidden=0), r"hidden must be an integer in \[1, inf\), got 0"),
])
def test_bad_input_is_refused_before_any_compute(teacher, monkeypatch, call, message):
    monkeypatch.setattr(nets, "run", lambda *a, **k: pytest.fail("computed before refusing"))
    with pytest.raises(ValueError, match=message):
        call(teacher)


def test_a_training_is_cached_under_its_values(tmp_path, monkeypatch, addition):
    monkeypatch.setenv(gk.cache.ENV, str(tmp_path))
    calls = [nets.train(addition, nets.MatrixProductMLP(7, 16, seed=s), "l2", alpha=1e-2, beta=1e-3, steps=5,
                        device="cpu", progress=False) for s in (0, 0, 1)]
    hits = [e["hit"] for e in gk.cache.events()[-3:]]
    assert hits == [False, True, False]  # a model rebuilt with the same seed is the same key; another seed is not
    np.testing.assert_array_equal(calls[0].params_final, calls[1].params_final)


def test_the_control_is_the_unpenalised_run_whichever_page_trains_it(tmp_path, monkeypatch, teacher):
    monkeypatch.setenv(gk.cache.ENV, str(tmp_path))
    model = nets.TwoLayerMLP(8, 20, 2, seed=0)
    control = nets.control(teacher, model, alpha=[1e-2, 3e-2], steps=20, device="cpu", progress=False)
    l1 = nets.train(teacher, model, "l1", alpha=[1e-2, 3e-2], beta=0.0, steps=20, device="cpu", progress=False)
    np.testing.assert_array_equal(control.config["beta"], 0.0)
    np.testing.assert_allclose(control.params_final, l1.params_final, rtol=0, atol=1e-6)
    again = nets.control(teacher, model, alpha=[1e-2, 3e-2], steps=20, device="cpu", progress=False)
    assert [e["hit"] for e in gk.cache.events()[-3:]] == [False, False, True]  # one cached run per setting
    np.testing.assert_array_equal(again.params_final, control.params_final)


def test_lstm_classifier_is_torch_lstm_with_a_linear_readout():
    model = nets.LSTMClassifier(9, 7, embedding=6, hidden=8, seed=0)
    tokens = torch.randint(0, 9, (5, 4), generator=torch.Generator().manual_seed(1))
    reference = torch.nn.LSTM(6, 8, batch_first=True)  # gate order i, f, g, o
    with torch.no_grad():
        reference.weight_ih_l0.copy_(model.W_ih)
        reference.weight_hh_l0.copy_(model.W_hh)
        reference.bias_ih_l0.copy_(model.bias)
        reference.bias_hh_l0.zero_()
        _, (h, _) = reference(model.embed[tokens])
        torch.testing.assert_close(model(tokens), model.readout(h[0]), rtol=1e-5, atol=1e-6)


def test_delay_by_seed_summarises_each_seed_alone():
    ab = np.array([1e-3, 2e-3, 3e-3, 4e-3])
    t1 = np.array([10, 10, 20, 10,   5, np.nan, 5, 5,   10, 10, 10, 10], dtype=float)
    t2 = np.array([400, 300, 200, 100,   np.nan, np.nan, 50, 50,   np.nan] * 1 + [np.nan] * 3, dtype=float)
    n1 = np.full(12, 2.0)
    n2 = np.array([1.0, 1.0, 0.5, 1.5,   1, 1, 3.0, 1.0,   1, 1, 1, 1])
    out = nets.delay_by_seed(ab, t1, t2, budget=1000, seeds=3, norm_t1=n1, norm_t2=n2)
    np.testing.assert_allclose(out["t2_over_t1"][:2], [np.median([40, 30, 10, 10]), 10.0])
    assert np.isnan(out["t2_over_t1"][2])  # nothing generalized
    # seed 0: t2 falls as alpha beta grows; seed 1: two never (counted last), two tied at 50
    assert out["spearman"][0] == pytest.approx(-1.0)
    assert out["spearman"][1] == pytest.approx(gk.metrics.rank_trend(ab, [[1001, 1001, 50, 50]]))
    assert out["spearman"][1] < -0.8
    assert np.isnan(out["spearman"][2])  # t2 the same throughout: no order
    np.testing.assert_allclose(out["norm_t2_over_t1"][:2], [0.5, 1.0])
    # delays 40, 30, 10, 10 against alpha beta 1, 2, 3, 4 (x 1e-3); seeds 1 and 2: fewer than four
    assert out["delay_spearman"][0] == pytest.approx(gk.metrics.rank_trend(ab, [[40, 30, 10, 10]]))
    assert np.isnan(out["delay_spearman"][1:]).all()
    assert out["memorized"].tolist() == [4, 3, 4] and out["generalized"].tolist() == [4, 2, 0]
    with pytest.raises(ValueError, match="alpha_beta must have 4 or 12 values"):
        nets.delay_by_seed(ab[:3], t1, t2, budget=1000, seeds=3)
