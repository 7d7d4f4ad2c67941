"""Checkpoints of the loop (grokkit.checkpoint, grokkit.kernels.run): a run stopped at a record
boundary (at the deadline, or killed after a periodic checkpoint) and resumed gives records and
final iterates bit-identical to an uninterrupted run, for every kernel family, on the PyTorch and
the fused CPU steps; damaged checkpoints are set aside, those of other code refused."""
import dataclasses
import importlib
import pickle
import sys
import textwrap
import time

import numpy as np
import pytest

import grokkit as gk
from grokkit import checkpoint, data
from grokkit.kernels import matrix as mk
from grokkit.kernels import nets

fused = importlib.import_module("grokkit.kernels.fused")
FUSED = fused.library() is not None and fused.library("matrix") is not None


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    """Checkpoints in a folder of the test's own, no result cache, no deadline."""
    monkeypatch.delenv("GROKKIT_CACHE", raising=False)
    monkeypatch.delenv(checkpoint.DEADLINE_ENV, raising=False)
    monkeypatch.delenv(checkpoint.EVERY_ENV, raising=False)
    monkeypatch.setenv(checkpoint.ENV, str(tmp_path / "checkpoints"))
    return tmp_path / "checkpoints"


def stop_at(monkeypatch, record: int, why: str = "deadline") -> None:
    """A clock that reaches the deadline (or the checkpoint interval) at the ``record``-th record
    boundary of the next run: it ticks one second at each reading, the run reads it once when it
    starts and once per record."""
    ticks = iter(range(10**9))
    monkeypatch.setattr(checkpoint, "_now", lambda: 1e9 + next(ticks))
    if why == "deadline":
        when = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(1e9 + record))
        monkeypatch.setenv(checkpoint.DEADLINE_ENV, when)
    else:
        monkeypatch.setenv(checkpoint.EVERY_ENV, str(record))


def same(a, b) -> None:
    """Two results equal bit for bit: every array field (NaN where NaN), every other field but the time."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name in ("seconds", "step_seconds"):
            continue
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for k in x:
                np.testing.assert_array_equal(x[k], y[k], err_msg=f"{f.name}[{k}]")
        elif isinstance(x, np.ndarray) or isinstance(x, list):
            np.testing.assert_array_equal(np.asarray(x, dtype=object if isinstance(x, list) else None),
                                          np.asarray(y, dtype=object if isinstance(y, list) else None),
                                          err_msg=f.name)
        else:
            assert x == y, f.name


def resumed(monkeypatch, folder, call, record: int = 7):
    """``call()`` stopped at the deadline at its ``record``-th record, then continued."""
    with monkeypatch.context() as m:
        stop_at(m, record)
        with pytest.raises(checkpoint.DeadlineReached, match="stopped at the deadline") as stop:
            call()
    saved = list(folder.rglob("*.ckpt"))
    assert len(saved) == 1 and str(saved[0]) in str(stop.value)
    loads, load = [], checkpoint.Checkpoint.load
    with monkeypatch.context() as m:
        m.setattr(checkpoint.Checkpoint, "load", lambda self: loads.append(load(self)) or loads[-1])
        result = call()
    assert loads[0] is not None and loads[0]["t"] > 0, "the second call continued the first"
    assert not list(folder.rglob("*.ckpt")), "a finished run deletes its checkpoint"
    return result


# --- every family, both paths -------------------------------------------------------------------

def sparse_problem():
    return data.sparse.problem(40, 3, 15, variance="1/N", seed=0)


def sparse_call(method):
    p = sparse_problem()
    grid = gk.kernels.grid(alpha=[0.05, 0.2], beta1=[1e-3, 5e-2])
    return lambda: gk.kernels.solve(method, p.X, p.y, **grid, beta2=1e-3, steps=3000, b_star=p.b_star, dense=20,
                                    per_decade=20, record_b=True, device="cpu", progress=False)


def stacked_call():
    problems = [data.sparse.problem(30, 3, N, variance="1/N", seed=1) for N in (10, 20)]
    X, y, b_star = data.sparse.stack_problems(problems)
    return lambda: gk.kernels.subgradient(X, y, alpha=0.1, beta1=1e-3, steps=2000, b_star=b_star, dense=20,
                                          per_decade=20, device="cpu", progress=False)


def stopping_call():
    """A configuration at an exact fixed point (b = 0 once beta1 is large) stops early, one diverges
    (the deep network's step limit is not checked), one takes decaying steps."""
    p = sparse_problem()
    ista = lambda: gk.kernels.ista(p.X, p.y, alpha=0.1, beta1=[1e-3, 10.0], steps=3000, b_star=p.b_star, dense=20,
                                   per_decade=20, device="cpu", progress=False)
    deep = lambda: gk.kernels.deep(p.X, p.y, depth=2, alpha=[0.1, 0.29], init_scale=10.0, steps=3000, b_star=p.b_star,
                                   dense=20, per_decade=20, device="cpu", progress=False)
    decay = lambda: gk.kernels.subgradient(p.X, p.y, alpha=0.1, beta1=1e-3, alpha_decay=[30.0, np.inf], steps=3000,
                                           b_star=p.b_star, dense=20, per_decade=20, device="cpu", progress=False)
    return lambda: (ista(), deep(), decay())


def deep_call():
    p = sparse_problem()
    return lambda: gk.kernels.deep(p.X, p.y, depth=[1, 2, 3, 2], alpha=0.1, beta1=[0.0, 1e-3, 1e-3, 0.0],
                                   beta2=1e-4, steps=2000, b_star=p.b_star, dense=20, per_decade=20,
                                   device="cpu", progress=False)


def diagonal_call(loss):
    p = sparse_problem()
    y = p.y if loss == "square" else np.sign(p.y)
    return lambda: gk.kernels.diagonal_net(p.X, y, alpha=[0.01, 0.05], steps=2000, depth=2, init_scale=0.1,
                                           loss=loss, dense=20, per_decade=20, device="cpu", progress=False)


def matrix_call(method):
    p = data.matrix.problem(6, 6, 2, 20, seed=0)
    return lambda: mk.METHODS[method](p.mask, p.y, (6, 6), alpha=[0.5, 1.0], beta_star=[1e-3, 1e-2], steps=2000,
                            A_star=p.A_star, dense=20, per_decade=20, device="cpu", progress=False)


def matrix_deep_call():
    p = data.matrix.problem(6, 6, 2, 20, seed=0)
    return lambda: mk.deep(p.mask, p.y, (6, 6), depth=2, alpha=[0.05, 0.1], beta_star=1e-3, steps=1500,
                           A_star=p.A_star, dense=20, per_decade=20, device="cpu", progress=False)


def two_factor_call(model):
    p = data.matrix.problem(6, 6, 1, 20, seed=0)
    return lambda: mk.two_factor(p.mask, p.y, (6, 6), model=model, alpha=0.05, init_scale=0.3, beta2=[0.0, 0.01],
                                 width=None if model == "symmetric" else 4,
                                 steps=1500, A_star=p.A_star, seed=3, dense=20, per_decade=20, device="cpu",
                                 progress=False)


def nets_call():
    task = gk.data.nets.modular_addition(7, 0.5, seed=2)
    model = nets.TwoLayerMLP(14, 16, 7, seed=0)
    return lambda: nets.train(task, model, "l1", alpha=[1e-3, 3e-3], beta=1e-4, steps=400, batch_size=8, seed=5,
                              dense=20, per_decade=20, device="cpu", progress=False)


CALLS = {
    **{f"sparse-{m}": (lambda m=m: sparse_call(m)) for m in ("subgradient", "ista", "projected_subgradient")},
    "sparse-stacked": stacked_call,
    "sparse-deep": deep_call,
    "sparse-stops-diverges-decays": stopping_call,
    **{f"diagonal-{loss}": (lambda loss=loss: diagonal_call(loss)) for loss in ("square", "logistic")},
    **{f"matrix-{m}": (lambda m=m: matrix_call(m)) for m in ("subgradient", "proximal", "projected_subgradient")},
    "matrix-deep": matrix_deep_call,
    **{f"two-factor-{m}": (lambda m=m: two_factor_call(m)) for m in ("asymmetric", "symmetric")},
    "nets-minibatch": nets_call,
}


@pytest.mark.parametrize("path", ["torch", "fused"])
@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.filterwarnings("ignore:deep.*diverged:RuntimeWarning")
def test_a_run_stopped_at_the_deadline_resumes_bit_identical(name, path, folders, monkeypatch):
    if path == "fused":
        if not FUSED:
            pytest.skip("no fused CPU steps on this machine")
    else:
        monkeypatch.setattr(fused, "library", lambda kind="sparse": None)
    call = CALLS[name]()
    whole = call()
    if isinstance(whole, tuple):  # several runs in one call: each stopped and continued in turn
        assert (whole[0].stopped_at[1] > 0, whole[1].diverged.tolist()) == (True, [False, True])
        again = whole
        for k in range(len(whole)):
            again = resumed(monkeypatch, folders, call, record=30 + k)
    else:
        again = resumed(monkeypatch, folders, call, record=30)
    for a, b in zip(*(w if isinstance(w, tuple) else (w,) for w in (whole, again))):
        same(a, b)
        assert a.backend == b.backend


@pytest.mark.skipif(not FUSED, reason="no fused CPU steps on this machine")
@pytest.mark.parametrize("name", ["sparse-subgradient", "matrix-subgradient", "diagonal-logistic"])
def test_the_fused_path_really_ran(name):
    assert CALLS[name]()().backend == "fused"


def test_a_killed_run_resumes_from_its_last_periodic_checkpoint(folders, monkeypatch):
    """The interval's checkpoint is written, then the process "dies" (an exception right after the
    write): the next call continues from it and ends where an uninterrupted run ends."""
    call = sparse_call("subgradient")
    whole = call()
    original = checkpoint.Checkpoint.save

    def save_then_die(self, *args):
        original(self, *args)
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        stop_at(m, 12, why="interval")
        m.setattr(checkpoint.Checkpoint, "save", save_then_die)
        with pytest.raises(KeyboardInterrupt):
            call()
    (saved,) = folders.rglob("*.ckpt")
    with open(saved, "rb") as fh:
        head = pickle.load(fh)
    assert 0 < head["t"] < head["steps"] == 3000
    same(whole, call())


def test_periodic_checkpoints_follow_the_interval(folders, monkeypatch):
    """With a 5 s interval (a clock of one second a record) a run saves at every fifth record; it
    keeps the newest only, and deletes it when it finishes."""
    writes = []
    original = checkpoint.Checkpoint.save
    monkeypatch.setattr(checkpoint.Checkpoint, "save", lambda self, state, t, steps: (writes.append(state["j"]),
                                                                                       original(self, state, t, steps)))
    stop_at(monkeypatch, 5, why="interval")
    sparse_call("subgradient")()
    assert writes[:3] == [4, 9, 14] and len(set(writes)) == len(writes)
    assert not list(folders.rglob("*.ckpt"))


def test_a_damaged_checkpoint_is_set_aside_and_the_run_starts_over(folders, monkeypatch):
    call = sparse_call("ista")
    whole = call()
    with monkeypatch.context() as m:
        stop_at(m, 9)
        with pytest.raises(checkpoint.DeadlineReached):
            call()
    (saved,) = folders.rglob("*.ckpt")
    saved.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    with pytest.warns(RuntimeWarning, match="is damaged .* the run starts over"):
        again = call()
    same(whole, again)
    assert saved.with_name(saved.name + ".damaged").is_file()


def test_a_checkpoint_of_other_code_is_refused_naming_what_changed(folders, monkeypatch):
    call = sparse_call("subgradient")
    with monkeypatch.context() as m:
        stop_at(m, 9)
        with pytest.raises(checkpoint.DeadlineReached):
            call()
    (saved,) = folders.rglob("*.ckpt")
    with open(saved, "rb") as fh:
        head = pickle.load(fh)
    assert "grokkit.kernels.sparse.subgradient_step" in head["code"]
    assert "grokkit.kernels.run.run" in head["code"] and "file:fused.c" in head["code"] or not FUSED
    head["code"]["grokkit.kernels.sparse.subgradient_step"] = "0" * 16
    with open(saved, "wb") as fh:
        pickle.dump(head, fh)
    with pytest.raises(checkpoint.CheckpointError, match=r"saved by other code: grokkit\.kernels\.sparse\."
                                                         r"subgradient_step changed since.*delete the file"):
        call()
    assert saved.is_file(), "a refused checkpoint is kept"


def test_a_deadline_without_a_checkpoint_folder_is_refused_before_the_run(monkeypatch):
    monkeypatch.delenv(checkpoint.ENV)
    monkeypatch.setenv(checkpoint.DEADLINE_ENV, "2h")
    with pytest.raises(ValueError, match=r"GROKKIT_DEADLINE is set, but subgradient cannot be checkpointed: no "
                                         r"checkpoint folder"):
        sparse_call("subgradient")()


@pytest.mark.parametrize("value", ["soon", "2 hours", "-5m", "2026-13-45T99:00"])
def test_a_bad_deadline_is_refused_naming_the_variable(value, monkeypatch):
    monkeypatch.setenv(checkpoint.DEADLINE_ENV, value)
    with pytest.raises(ValueError, match=r"\$GROKKIT_DEADLINE must be a duration such as .* got"):
        sparse_call("subgradient")()


def test_durations_and_times():
    assert checkpoint.duration("90") == checkpoint.duration("90s") == 90
    assert checkpoint.duration("1h30m") == 5400 and checkpoint.duration("2.5h") == 9000
    assert checkpoint.absolute("45m", start=100.0) == 100.0 + 2700
    assert checkpoint.absolute("2026-11-27T21:00:00+00:00") == 1795813200.0


# --- the fingerprint: the code a run depends on, not the whole package --------------------------

def write_package(root, helper_body: str, other_body: str):
    (root / "ckpt_fixture").mkdir(exist_ok=True)
    (root / "ckpt_fixture" / "__init__.py").write_text("")
    (root / "ckpt_fixture" / "steps.py").write_text(textwrap.dedent("""
        from ckpt_fixture import helpers

        def step(x):
            return helpers.twice(x) + 1
    """))
    (root / "ckpt_fixture" / "helpers.py").write_text(textwrap.dedent(f"""
        def twice(x):
            {helper_body}

        def unrelated(x):
            {other_body}
    """))
    for name in [m for m in sys.modules if m.startswith("ckpt_fixture")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    return importlib.import_module("ckpt_fixture.steps").step


def test_the_fingerprint_changes_with_the_code_a_run_calls_only(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    base = checkpoint.sources(write_package(tmp_path, "return 2 * x", "return x"), package="ckpt_fixture")
    assert set(base) == {"ckpt_fixture.steps.step", "ckpt_fixture.helpers.twice"}
    unrelated = checkpoint.sources(write_package(tmp_path, "return 2 * x", "return x - 1"), package="ckpt_fixture")
    assert unrelated == base
    edited = checkpoint.sources(write_package(tmp_path, "return x + x", "return x"), package="ckpt_fixture")
    assert edited.keys() == base.keys() and edited["ckpt_fixture.helpers.twice"] != base["ckpt_fixture.helpers.twice"]
    assert edited["ckpt_fixture.steps.step"] == base["ckpt_fixture.steps.step"]


def test_the_fingerprint_ignores_docstrings_and_comments(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    base = checkpoint.sources(write_package(tmp_path, "return 2 * x", "return x"), package="ckpt_fixture")
    documented = checkpoint.sources(write_package(tmp_path, '"""Twice x (Eq. 1)."""; return 2 * x  # doubled',
                                                  "return x"), package="ckpt_fixture")
    assert documented == base


def test_the_fingerprint_of_a_kernel_run_leaves_out_the_rest_of_grokkit():
    code = checkpoint.sources((gk.kernels.run.run, gk.kernels.sparse.SPARSE, gk.kernels.sparse.subgradient_step))
    assert "grokkit.kernels.sparse.subgradient_step" in code and "grokkit.kernels.run.residual" in code
    assert not any(name.startswith(("grokkit.plots", "grokkit.cli", "grokkit.kernels.nets", "grokkit.theory"))
                   for name in code)
