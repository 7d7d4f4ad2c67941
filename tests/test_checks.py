"""Tests of the argument checks (grokkit._checks) and of every bad input of issue #6: each
row of the issue's table is a row of TABLE, refused with a message that names the
parameter, gives the valid type or range, and quotes the value as written."""
import importlib
import math
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import grokkit as gk
from grokkit import _checks, data, metrics, theory

run_mod = importlib.import_module("grokkit.kernels.run")
sparse_mod = importlib.import_module("grokkit.kernels.sparse")

PROB = data.sparse.problem(40, 3, 15, variance="1/N", seed=0)
ALPHA = 0.5 / PROB.lambda_max
STEPS = np.array([0, 1, 2, 5, 10, 20, 50, 100, 200])
CURVES = np.arange(18, dtype=float).reshape(2, 9)
CUDA = "device must be 'auto' or 'cpu' on this machine \\(no CUDA device\\)"


def with_nan(a, index):
    a = np.array(a, dtype=float)
    a[index] = np.nan
    return a


def ista(**kwargs):
    """The ISTA kernel on PROB, with ``kwargs`` replacing its arguments."""
    args = {"X": PROB.X, "y": PROB.y, "b_star": PROB.b_star, "alpha": ALPHA, "beta1": 1e-3, "steps": 10,
            "device": "cpu", **kwargs}
    return gk.kernels.ista(args.pop("X"), args.pop("y"), **args)


def traj():
    """A stand-in for a Trajectory: what memorization_generalization reads."""
    return SimpleNamespace(steps=STEPS, train_error=CURVES, test_error=CURVES)


# (row of the issue, call, message); every call must raise ValueError before any compute
TABLE = [
    ("N as a string", lambda: data.sparse.problem(N="30"), r"N must be an integer in \[1, inf\), got '30'$"),
    ("dense below 0", lambda: ista(dense=-1), r"dense must be an integer in \[0, inf\), got -1$"),
    ("steps as a string", lambda: ista(steps="10"),
     r"steps must be an integer in \[1, 1000000000000000\], got '10'$"),
    ("seed as a list", lambda: data.sparse.problem(seed=[1, 2]),
     r"seed must be an integer in \[0, 2\*\*32 - 1\] \(a seed\), got \[1, 2\]$"),
    ("seed True", lambda: data.sparse.problem(seed=True), r"seed must be an integer in .*, got True$"),
    ("seed -1", lambda: data.sparse.problem(seed=-1), r"seed must be an integer in .*, got -1$"),
    ("seed 2**40", lambda: data.sparse.problem(seed=2**40), r"seed must be an integer in .*, got 1099511627776$"),
    ("seed 1.5", lambda: data.sparse.problem(seed=1.5), r"seed must be an integer in .*, got 1\.5$"),
    ("kernel seed -1", lambda: ista(seed=-1), r"seed must be an integer in \[0, 2\*\*32 - 1\] .*, got -1$"),
    ("lower-level seed", lambda: data.sparse.noise(10, 2.0, 1.0, seed=np.float64(1.0)),
     r"seed must be an integer in .*, got 1\.0$"),
    ("X with NaN", lambda: ista(X=with_nan(PROB.X, (2, 3))),
     r"X must be finite, got nan at index \(2, 3\) \(1 non-finite entry\)$"),
    ("X with NaN, theory", lambda: theory.sparse.eigenvalues(with_nan(PROB.X, (0, 0))), r"X must be finite, got nan"),
    ("y with NaN", lambda: ista(y=with_nan(PROB.y, 4)), r"y must be finite, got nan at index 4"),
    ("y with inf", lambda: ista(y=np.where(np.arange(PROB.N) == 1, np.inf, PROB.y)),
     r"y must be finite, got inf at index 1"),
    ("X of shape (0, 100)", lambda: ista(X=np.zeros((0, 100)), y=np.zeros(0), b_star=None),
     r"X must have N >= 1 rows and n >= 1 columns, got shape \(0, 100\)$"),
    ("b_star all zeros", lambda: ista(b_star=np.zeros(PROB.n)),
     r"b_star must be nonzero: the relative recovery error divides by its norm, got all zeros$"),
    ("b_star row of zeros", lambda: ista(alpha=[ALPHA, ALPHA], b_star=np.stack([PROB.b_star, 0 * PROB.b_star])),
     r"b_star must be nonzero: .*, got all zeros \(configuration 1\)$"),
    ("y all zeros", lambda: ista(y=np.zeros(PROB.N)), r"y must be nonzero: the relative training error"),
    ("b_star all zeros, metrics", lambda: metrics.relative_error(np.ones(3), np.zeros(3)),
     r"b_star must be nonzero"),
    ("torch.device('cuda')", lambda: ista(device=torch.device("cuda")), CUDA + r", got torch.device\('cuda'\)$"),
    ("'cuda'", lambda: ista(device="cuda"), CUDA + r", got 'cuda'$"),
    ("'cuda:0'", lambda: ista(device="cuda:0"), CUDA + r", got 'cuda:0'$"),
    ("torch.device('cuda:1')", lambda: gk.kernels.resolve_device(torch.device("cuda:1")),
     CUDA + r", got torch.device\('cuda:1'\)$"),
    ("data.sparse.Problem.tensors on CUDA", lambda: PROB.tensors(torch.device("cuda")),
     CUDA + r", got torch.device\('cuda'\)$"),
    ("device 'gpu'", lambda: ista(device="gpu"),
     r"device must be one of 'auto', 'cpu', 'cuda', 'cuda:K' or a torch.device, got 'gpu'$"),
    ("empty grid", lambda: ista(alpha=[]), r"alpha must have at least one value \(a grid is never empty\), got \[\]$"),
    ("empty grid axis", lambda: gk.kernels.grid(alpha=[], beta1=[1e-3]), r"alpha must have at least one value"),
    ("train_threshold -1", lambda: metrics.memorization_generalization(traj(), train_threshold=-1),
     r"train_threshold must be in \(0\.0, inf\), got -1$"),
    ("test_threshold NaN", lambda: metrics.memorization_generalization(traj(), test_threshold=float("nan")),
     r"test_threshold must be in \(0\.0, inf\), got nan$"),
    ("threshold inf", lambda: metrics.memorization_generalization(traj(), "threshold", math.inf),
     r"train_threshold must be in \(0\.0, inf\), got inf$"),
    ("M above the number of records", lambda: metrics.plateau_step(STEPS, CURVES, M=12),
     r"M must be an integer in \[1, T\] = \[1, 9\], got 12$"),
    ("K above the number of records", lambda: metrics.plateau_step(STEPS, CURVES, K=10),
     r"K must be an integer in \[1, T\] = \[1, 9\], got 10$"),
    ("value_at past the end", lambda: metrics.value_at(STEPS, CURVES, [5, 250]),
     r"at must be at most the last recorded step 200, got 250$"),
    ("steps and curve disagree", lambda: metrics.value_at(STEPS[:-1], CURVES, [5, 5]),
     r"steps and curve must have shapes \(T,\) and \(G, T\)"),
    ("generalization_delay beta1 -1", lambda: theory.sparse.generalization_delay(PROB.b_hat, 0.1, beta1=-1),
     r"beta1 must be in \[0\.0, inf\), got -1$"),
    ("generalization_delay alpha 0", lambda: theory.sparse.generalization_delay(PROB.b_hat, [0.1, 0], 1e-3),
     r"alpha must be in \(0\.0, inf\), got 0$"),
    ("memorization_radius beta1 -1", lambda: theory.sparse.memorization_radius(10, 0.1, -1.0, 0.5),
     r"beta1 must be in \[0\.0, inf\), got -1\.0$"),
    ("log_schedule(10**20)", lambda: gk.kernels.log_schedule(10**20),
     r"steps must be an integer in \[1, 1000000000000000\], got 100000000000000000000$"),
    ("s = 0", lambda: data.sparse.problem(100, 0, 30), r"s must be an integer in \[1, n\] = \[1, 100\], got 0$"),
    ("alpha = 0.0", lambda: ista(alpha=0.0), r"alpha must be in \(0\.0, inf\), got 0\.0$"),
    ("alpha = 0", lambda: ista(alpha=0), r"alpha must be in \(0\.0, inf\), got 0$"),
    ("alpha = np.float64(0)", lambda: ista(alpha=np.float64(0)), r"alpha must be in \(0\.0, inf\), got 0\.0$"),
    ("alpha in a numpy grid", lambda: ista(alpha=np.array([ALPHA, -1.0])), r"alpha must be in .*, got -1\.0$"),
    ("alpha = None", lambda: ista(alpha=None), r"alpha must be a number in \(0\.0, inf\), got None$"),
]


@pytest.fixture
def no_compute(monkeypatch):
    """Make every draw and every iteration fail, so that a ValueError proves the check came first."""
    def computed(*args, **kwargs):
        raise AssertionError("computed before validating the arguments")

    for module, name in ((data.sparse, "dictionary"), (data.sparse, "sparse_signal"), (data.sparse, "measurement_matrix"),
                         (sparse_mod, "lambda_max"), (sparse_mod, "check_step_size"), (sparse_mod, "run")):
        monkeypatch.setattr(module, name, computed)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("row, call, message", TABLE, ids=[row for row, _, _ in TABLE])
def test_bad_input_is_refused_before_compute(no_compute, row, call, message):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a bad input is refused, never reported as a divergence
        with pytest.raises(ValueError, match=message):
            call()


def test_no_message_prints_a_numpy_scalar(no_compute):
    messages = []
    for _, call, _ in TABLE:
        with pytest.raises(ValueError) as err:
            call()
        messages.append(str(err.value))
    assert len(messages) == len(TABLE)
    for message in messages:
        assert not re.search(r"\bnp\.|numpy\.|array\(|tensor\(", message), message


# --- what the table's rows accept -------------------------------------------------------------


def test_overflow_is_reported_as_divergence_by_index():
    """The iterates stay finite, but ||b||_2 overflows (at step 0, at step 1)."""
    for kwargs in (dict(init_scale=[1e-6, 1e200]), dict(beta1=[1e-3, 1e300])):
        with pytest.warns(RuntimeWarning, match=r"1 configuration\(s\) diverged .*: #1 \(alpha="):
            traj = gk.kernels.subgradient(PROB.X, PROB.y, b_star=PROB.b_star, **{"alpha": [ALPHA, ALPHA],
                                          "beta1": 1e-3, "steps": 50, "device": "cpu", **kwargs})
        np.testing.assert_array_equal(traj.diverged, [False, True])
        assert np.isfinite(traj.l2[0]).all() and np.isnan(traj.b_final[1]).all()


def test_nan_curves_by_design_are_not_divergence():
    """No b_star: test_error is NaN. An exact fit (rows of X are canonical vectors): the gradient
    ratio divides by ||G|| = 0. Neither is a divergence."""
    p = data.sparse.problem(40, 3, 15, tau=1.0, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        no_b_star = ista(steps=50, b_star=None)
        exact = gk.kernels.projected_subgradient(p.X, p.y, b_star=p.b_star, alpha=0.1, beta1=[0.0, 1e-3],
                                                 steps=50, device="cpu")
    assert np.isnan(no_b_star.test_error).all() and not no_b_star.diverged.any()
    assert not np.isfinite(exact.grad_ratio).all() and not exact.diverged.any()


def test_every_cuda_spelling_when_cuda_is_available(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    resolve = gk.kernels.resolve_device
    assert resolve("auto") == resolve("cuda") == resolve(torch.device("cuda")) == torch.device("cuda")
    assert resolve("cuda:1") == resolve(torch.device("cuda", 1)) == torch.device("cuda:1")
    with pytest.raises(ValueError, match=r"device must be 'cuda:K' with K in \[0, 1\] on this machine, got 'cuda:2'"):
        resolve("cuda:2")
    with pytest.raises(ValueError, match=r"device must be a CPU or CUDA device, got torch.device\('meta'\)"):
        resolve(torch.device("meta"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve("auto") == resolve("cpu") == resolve(torch.device("cpu")) == torch.device("cpu")


def test_value_at_reads_the_first_record_at_or_after():
    np.testing.assert_array_equal(metrics.value_at(STEPS, CURVES, [3, 5]), [3.0, 12.0])  # 3 -> record of step 5
    np.testing.assert_array_equal(metrics.value_at(STEPS, CURVES, [200]), [8.0, 17.0])  # one step for all
    got = metrics.value_at(STEPS, CURVES, np.array([np.nan, 199.5]))
    assert np.isnan(got[0]) and got[1] == 17.0
    with pytest.raises(ValueError, match=r"at must have one step per curve \(G = 2\) or one for all"):
        metrics.value_at(STEPS, CURVES, [1, 2, 3])


def test_log_schedule_up_to_the_largest_step_count():
    s = gk.kernels.log_schedule(run_mod.MAX_STEPS)
    assert s[-1] == 10**15 and (np.diff(s) > 0).all() and s.dtype == np.int64
    assert (s.astype(float) == s).all()  # exact in float64, as the metrics return steps


def test_generalization_delay_without_l1_is_infinite():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(theory.sparse.generalization_delay(PROB.b_hat, 0.1, [0.0, 1.0])[0], np.inf)


def test_seeds_accept_numpy_integers_and_the_full_range():
    a = data.sparse.problem(20, 2, 8, seed=np.int64(3))
    np.testing.assert_array_equal(a.X, data.sparse.problem(20, 2, 8, seed=3).X)
    data.sparse.problem(20, 2, 8, seed=2**32 - 1)
    ista(seed=np.uint32(2**32 - 1))


# --- the vocabulary -----------------------------------------------------------------------------


def test_show_prints_values_as_written():
    assert _checks.show(np.float64(0.0)) == "0.0"
    assert _checks.show(np.int64(3)) == "3"
    assert _checks.show(np.array(2.5)) == "2.5"
    assert _checks.show(torch.tensor(1.5, dtype=torch.float64)) == "1.5"
    assert _checks.show(None) == "None" and _checks.show("cpu") == "'cpu'"
    assert _checks.show([np.float64(1.5), (np.int64(1),)]) == "[1.5, (1,)]"


def test_check_int():
    assert _checks.check_int("steps", 1e6, 1) == 1_000_000
    assert _checks.check_int("n", np.int64(5), 1) == 5
    for bad in (True, "3", None, 2.5, math.inf, math.nan, 0):
        with pytest.raises(ValueError, match=r"^n must be an integer in \[1, inf\), got "):
            _checks.check_int("n", bad, 1)


def test_check_seed():
    assert _checks.check_seed("seed", np.uint32(7)) == 7
    for bad in (2**32, -1, 1.0, np.float64(1), True, np.bool_(True), "1", None):
        with pytest.raises(ValueError, match=r"^seed must be an integer in \[0, 2\*\*32 - 1\]"):
            _checks.check_seed("seed", bad)


def test_check_range_refuses_strings_and_bools():
    assert _checks.check_range("beta1", np.float32(0.5), 0.0) == 0.5
    for bad in ("0.1", True, None, [0.1]):
        with pytest.raises(ValueError, match=r"^beta1 must be a number in \[0\.0, inf\], got "):
            _checks.check_range("beta1", bad, 0.0)


def test_check_grid():
    np.testing.assert_array_equal(_checks.check_grid("alpha", [[1, 2]]), [[1.0, 2.0]])
    assert _checks.check_grid("alpha", 0.5).shape == ()
    for bad, shown in (([], r"\[\]"), (np.array([]), r"array\(\[\], dtype=float64\)")):
        with pytest.raises(ValueError, match=r"alpha must have at least one value .*, got " + shown):
            _checks.check_grid("alpha", bad)
    with pytest.raises(ValueError, match=r"alpha must be in \(-inf, inf\), got nan"):
        _checks.check_grid("alpha", [1.0, math.nan])


def test_check_finite_on_numpy_torch_and_lists():
    _checks.check_finite("X", np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"X must be finite, got -inf at index \(1, 0\) \(2 non-finite entries\)"):
        _checks.check_finite("X", torch.tensor([[1.0, 2.0], [-math.inf, math.nan]]))
    with pytest.raises(ValueError, match=r"y must be finite, got nan at index 1 \(1 non-finite entry\)"):
        _checks.check_finite("y", [0.0, math.nan])
    with pytest.raises(ValueError, match=r"^t must be finite, got nan \(1 non-finite entry\)$"):
        _checks.check_finite("t", math.nan)
