"""The library's shape: a module per chapter in ``data`` and ``theory`` (as in ``kernels``), the
same name for the same idea in every chapter, and a light ``import grokkit``."""
import subprocess
import sys

import numpy as np
import pytest

import grokkit as gk

CHAPTERS = {"data": ("sparse", "matrix", "nets", "background"),
            "theory": ("sparse", "matrix", "convergence", "background")}


def test_import_grokkit_is_light():
    """``import grokkit`` loads every chapter module, and neither matplotlib nor cvxpy."""
    code = ("import sys, grokkit; "
            "print(sorted(m for m in ('matplotlib', 'cvxpy') if m in sys.modules)); "
            "print(sorted(m for m in sys.modules if m.startswith(('grokkit.data.', 'grokkit.theory.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert eval(out[1]) == sorted(f"grokkit.{pkg}.{m}" for pkg, mods in CHAPTERS.items() for m in mods)


def _public(module) -> list[str]:
    return [n for n, v in vars(module).items()
            if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]


@pytest.mark.parametrize("pkg", sorted(CHAPTERS))
def test_no_prefix_stands_in_for_a_module(pkg):
    """The same idea has the same name in every chapter: ``theory.matrix.rho`` beside
    ``theory.sparse.rho``, never ``matrix_rho``; ``data.sparse.problem``, never ``make_problem``.
    (``data.sparse.sparse_signal`` is a sparse signal: no other chapter has a ``signal``.)"""
    modules = {mod: getattr(getattr(gk, pkg), mod) for mod in CHAPTERS[pkg]}
    names = {mod: set(_public(module)) for mod, module in modules.items()}
    for mod, own in names.items():
        assert own, mod
        others = set().union(*(v for k, v in names.items() if k != mod))
        bad = [n for n in own if n.startswith("make_")
               or any(n.startswith(f"{m}_") and n[len(m) + 1:] in others | own for m in CHAPTERS[pkg])]
        assert not bad, f"grokkit.{pkg}.{mod}: {bad}"


def _sensing(N=4, n=7, seed=0):
    """A sensing problem on a 1 × n matrix: vec A is the vector b, so every sparse quantity that
    depends on the data term alone must equal its matrix twin."""
    rs = np.random.RandomState(seed)
    return rs.randn(N, n), rs.randn(N), rs.randn(n), rs.randn(n), (1, n)


def test_matrix_twins_are_the_sparse_functions_on_vec_a():
    X, y, b, b2, shape = _sensing()
    s, m = gk.theory.sparse, gk.theory.matrix
    assert m.rho(X, shape, 0.1, 0.2) == pytest.approx(s.rho(X, 0.1, 0.2), rel=1e-12)
    np.testing.assert_allclose(m.rho_range(X, shape, [0.1, 0.3]), s.rho_range(X, [0.1, 0.3]), rtol=1e-12)
    np.testing.assert_allclose(m.gradient(X, shape, b[None], y)[0], s.gradient(X, y, b), rtol=1e-12)
    np.testing.assert_allclose(m.range_distance(X, shape, b[None], b2[None]), s.range_distance(X, b, b2), rtol=1e-10)
    np.testing.assert_allclose(m.least_squares(X, shape, y, 0.3)[0], gk.data.sparse.least_squares(X, y, 0.3),
                               rtol=1e-12)
    for name in ("printed", "corrected"):
        f_s, f_m = getattr(s, f"least_squares_residual_{name}"), getattr(m, f"least_squares_residual_{name}")
        assert f_m(X, shape, b[None], 0.5, 0.1) == pytest.approx(f_s(X, b, 0.5, 0.1), rel=1e-12)
    assert (m.least_squares_residual_monte_carlo(X, shape, b[None], 0.5, 0.1, draws=50, seed=3)
            == s.least_squares_residual_monte_carlo(X, b, 0.5, 0.1, draws=50, seed=3))
    assert m.memorization_time(2.0, 3, 4, 0.1, 0.01, 0.9) == s.memorization_time(2.0, 12, 0.1, 0.01, 0.9)
    assert m.distance_bound(2.0, 3, 4, 0.1, 0.01, 0.9, 5) == s.distance_bound(2.0, 12, 0.1, 0.01, 0.9, 5)
    assert m.ball_entry_time(2.0, 3, 4, 0.1, 0.01, 0.9) == s.ball_entry_time(2.0, 12, 0.1, 0.01, 0.9)


def test_both_chapters_draw_a_problem_with_the_same_name():
    sparse = gk.data.sparse.problem(20, 3, 10, seed=0)
    matrix = gk.data.matrix.problem(5, 4, r=1, N=12, seed=0)
    assert isinstance(sparse, gk.data.sparse.Problem) and isinstance(matrix, gk.data.matrix.Problem)
    assert (sparse.n, sparse.N) == (20, 10)
