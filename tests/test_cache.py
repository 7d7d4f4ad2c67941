"""Tests of the result cache (grokkit.cache), its command, and the fused library's recovery."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import grokkit as gk
from grokkit import cache, cli
from grokkit.kernels import fused

SLOW_MODULE = """
import time
from pathlib import Path

from grokkit.cache import cached, events


@cached
def slow_square(x, log):
    with open(log, "a") as fh:
        fh.write("computed\\n")
    time.sleep(2.0)
    return x * x
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def problem():
    return gk.data.sparse.problem(40, 3, 15, variance="1/N", seed=2)


def test_off_without_the_environment_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.delenv(gk.kernels.run.PROGRESS_ENV, raising=False)  # a page run in this process sets it
    monkeypatch.chdir(tmp_path)
    before = len(cache.events())
    p = problem()
    gk.kernels.ista(p.X, p.y, alpha=0.1, beta1=1e-3, steps=50)
    assert cache.directory() is None and len(cache.events()) == before
    assert list(tmp_path.iterdir()) == []


def test_a_kernel_run_is_computed_once(folder: Path) -> None:
    p = problem()
    kwargs = dict(b_star=p.b_star, alpha=[0.05, 0.1], beta1=1e-3, steps=300, seed=4)
    first = gk.kernels.subgradient(p.X, p.y, **kwargs)
    second = gk.kernels.subgradient(p.X, p.y, progress=False, **kwargs)  # progress is not in the key
    third = gk.kernels.subgradient(p.X, p.y, **{**kwargs, "seed": 5})
    assert [e["hit"] for e in cache.events()[-3:]] == [False, True, False]
    assert [e["function"] for e in cache.events()[-3:]] == ["subgradient"] * 3
    np.testing.assert_array_equal(first.b_final, second.b_final)
    np.testing.assert_array_equal(first.test_error, second.test_error)
    assert not np.array_equal(first.b_final, third.b_final)
    assert cache.info(folder)["by_function"] == {"subgradient": 2}


def test_a_changed_grokkit_source_misses(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = problem()
    gk.baselines.basis_pursuit(p.X, p.y)
    gk.baselines.basis_pursuit(p.X, p.y)
    monkeypatch.setattr(cache, "source_hash", lambda: "another-source")
    gk.baselines.basis_pursuit(p.X, p.y)
    assert [e["hit"] for e in cache.events()[-3:]] == [False, True, False]


def test_source_hash_covers_every_python_and_c_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "grokkit"
    shutil.copytree(Path(gk.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "_PACKAGE", copy)
    hashes = [cache.source_hash.__wrapped__()]
    for edited in (copy / "kernels" / "fused.c", copy / "metrics.py"):
        edited.write_text(edited.read_text(encoding="utf-8") + "\n/* edited */\n", encoding="utf-8")
        hashes.append(cache.source_hash.__wrapped__())
    (copy / "notes.txt").write_text("not source", encoding="utf-8")
    hashes.append(cache.source_hash.__wrapped__())
    assert len(set(hashes[:3])) == 3 and hashes[3] == hashes[2]
    assert all(len(h) == 16 for h in hashes)


def test_two_processes_compute_an_entry_once(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "slowmod.py").write_text(SLOW_MODULE, encoding="utf-8")
    log = tmp_path / "computed.log"
    script = textwrap.dedent(f"""
        from slowmod import slow_square, events
        assert slow_square(7, {str(log)!r}) == 49
        print(events()[0]["hit"])
    """)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert all(run.returncode == 0 for run in runs), outputs
    assert sorted(out.strip() for out, _ in outputs) == ["False", "True"]  # one computed, one waited and read
    assert log.read_text(encoding="utf-8").splitlines() == ["computed"]


def test_cache_command(folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(gk.__file__).parent.parent)
    assert cli.main(["cache", "info"]) == 0
    assert capsys.readouterr().out.strip() == f"{folder}: no cache yet"
    p = problem()
    gk.kernels.ista(p.X, p.y, alpha=0.1, beta1=1e-3, steps=50)
    gk.baselines.lasso(p.X, p.y, beta1=1e-3)
    assert cli.main(["cache", "info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{folder}: 2 entries, ") and lines[1:] == ["  ista: 1", "  lasso: 1"]
    assert cli.main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.strip() == f"removed 2 entries from {folder}"
    assert cache.info(folder)["entries"] == 0


@pytest.fixture
def fused_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if fused.library() is None:
        pytest.skip("no fused CPU path on this machine (needs x86-64 with AVX2/FMA and cc)")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fused.library.cache_clear()
    yield tmp_path / "grokkit"
    fused.library.cache_clear()


def test_a_truncated_fused_library_is_rebuilt(fused_cache: Path) -> None:
    """Issue 5: a truncated fused-<hash>.so made every kernel call raise OSError."""
    # Built by another process: a library loaded here must not be truncated (its pages are mapped).
    subprocess.run([sys.executable, "-c", "from grokkit.kernels import fused; assert fused.library()"], check=True)
    (built,) = fused_cache.glob("fused-*.so")
    size = built.stat().st_size
    built.write_bytes(built.read_bytes()[:100])
    assert fused.library() is not None
    assert built.stat().st_size == size
    p = problem()
    assert gk.kernels.ista(p.X, p.y, alpha=0.1, beta1=1e-3, steps=20).backend == "fused"


def test_an_unloadable_fused_library_falls_back_with_one_warning(fused_cache: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_build(compiler: str, source: Path, flags=()) -> Path:
        fused_cache.mkdir(parents=True, exist_ok=True)
        target = fused_cache / "fused-broken.so"
        target.write_bytes(b"not a library")
        return target

    monkeypatch.setattr(fused, "_build", broken_build)
    with pytest.warns(RuntimeWarning, match="could not be loaded or rebuilt; using the PyTorch steps"):
        assert fused.library() is None
    p = problem()
    assert gk.kernels.ista(p.X, p.y, alpha=0.1, beta1=1e-3, steps=20).backend == "torch"


def test_a_damaged_fused_library_is_rebuilt_before_it_is_loaded(fused_cache: Path) -> None:
    """Issue 22: a library cut in half (or overwritten in place) still loads and then dies with
    SIGBUS on its first call; its build record catches it before it is loaded."""
    run = [sys.executable, "-c", textwrap.dedent("""
        import grokkit as gk
        p = gk.data.sparse.problem(40, 3, 15, variance="1/N", seed=2)
        print(gk.kernels.ista(p.X, p.y, alpha=0.1, beta1=1e-3, steps=20).backend)
    """)]
    env = {**os.environ, "XDG_CACHE_HOME": str(fused_cache.parent), "GROKKIT_CACHE": ""}
    assert subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout.strip() == "fused"
    (built,) = fused_cache.glob("fused-*.so")
    intact = built.read_bytes()
    for damage in (intact[:len(intact) // 2], intact[:4096] + bytes(len(intact) - 4096)):
        built.write_bytes(damage)
        out = subprocess.run(run, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == "fused" and built.read_bytes() == intact


def _entry(folder: Path, function: str) -> Path:
    (entry,) = (folder / cache.ENTRIES / function).iterdir()
    return entry


@pytest.mark.parametrize("damage", ["truncate", "overwrite", "record"])
def test_a_damaged_entry_is_a_miss_recomputed_and_replaced(folder: Path, damage: str) -> None:
    """Issue 22: a truncated entry served joblib's traceback and counted as a hit; an entry
    overwritten in place (same size) served a silently wrong result."""
    p = problem()
    kwargs = dict(b_star=p.b_star, alpha=[0.05, 0.1], beta1=1e-3, steps=300, seed=4, record_b=True)
    first = gk.kernels.subgradient(p.X, p.y, **kwargs)
    result = _entry(folder, "subgradient") / cache.RESULT
    data = bytearray(result.read_bytes())
    if damage == "truncate":
        result.write_bytes(data[:len(data) // 2])
    elif damage == "overwrite":
        middle = len(data) // 2
        data[middle:middle + 4096] = np.random.RandomState(0).bytes(4096)
        result.write_bytes(bytes(data))
    else:
        (result.parent / cache.RECORD).unlink()
    second = gk.kernels.subgradient(p.X, p.y, **kwargs)
    third = gk.kernels.subgradient(p.X, p.y, **kwargs)
    events = cache.events()[-2:]
    assert [e["hit"] for e in events] == [False, True]
    expected = {"truncate": "size", "overwrite": "checksum mismatch", "record": "no record"}[damage]
    assert expected in events[0]["recomputed"] and "recomputed" not in events[1]
    for run in (second, third):
        np.testing.assert_array_equal(run.b, first.b)
        np.testing.assert_array_equal(run.test_error, first.test_error)


def test_a_result_that_cannot_be_stored_is_still_returned(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache, "_store", full_disk)
    p = problem()
    with pytest.warns(RuntimeWarning, match="could not store ista's result .* the result is used, not kept"):
        run = gk.kernels.ista(p.X, p.y, alpha=0.1, beta1=1e-3, steps=50)
    assert run.b_final.shape == (1, 40) and cache.info(folder)["entries"] == 0
