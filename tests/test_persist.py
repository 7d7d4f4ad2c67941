"""Issue 22: nothing persisted is trusted unchecked. Each bug and each poor case of the trial
(a fresh clone, broken on purpose) is a test here: damaged result-cache entries, an output folder
that fails during `grokkit run all`, None overrides, the status of a failed run, stale and
partial books, the book's swap, the cache folder, the paper preset's timeout and page, killed
clients, complex inputs, networks that do not fit their task, and grids too large to hold."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

import grokkit as gk
from grokkit import cli, pipeline
from grokkit.kernels import nets
from grokkit.kernels import run as kernel_run
from test_pipeline import FRONT_MATTER, grokkit, out_dir, repo, wait_for  # noqa: F401 (repo: a fixture)

# A page whose one kernel run goes through the result cache.
CACHED = FRONT_MATTER + """
# Cached notebook

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
```

```{code-cell} ipython3
import grokkit as gk

p = gk.data.sparse.problem(40, 3, 15, variance="1/N", seed=2)
run = gk.kernels.ista(p.X, p.y, b_star=p.b_star, alpha=0.1, beta1=1e-3, steps=200)
report = gk.Report("cached", {"preset": preset})
report.measure(error=float(run.test_error[0, -1]))
report.claim_below("the error is small", float(run.test_error[0, -1]), 1.0)
report.save()
print(f"error {run.test_error[0, -1]:.6e}")
```
"""

# Parameters whose None is a setting of their own: snr=None is noiseless, batch_size=None the full batch.
NONES = FRONT_MATTER + """
# None settings

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
snr = None          # None: noiseless
batch_size = None   # None: the full batch
seed = None
```

```{code-cell} ipython3
import grokkit as gk

PRESETS = {"quick": dict(snr=1e8, batch_size=64, seed=1), "paper": dict(snr=1e8, batch_size=2048, seed=1)}
p = gk.resolve(PRESETS, preset, globals())
gk.Report("nones", p).save()
```
"""


@pytest.fixture
def book(repo: Path) -> Path:
    """The fake repository with the two extra notebooks and a buildable book of nb1 and nb2."""
    demo = repo / "notebooks" / "demo"
    (demo / "cached.md").write_text(CACHED, encoding="utf-8")
    (demo / "nones.md").write_text(NONES, encoding="utf-8")
    (repo / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n"
                                   "  - file: book/generated/demo/nb1\n  - file: book/generated/demo/cached\n",
                                   encoding="utf-8")
    (repo / "_config.yml").write_text("title: demo\nexecute:\n  execute_notebooks: \"off\"\n"
                                      "only_build_toc_files: true\nparse:\n  myst_enable_extensions:\n"
                                      "    - colon_fence\n", encoding="utf-8")
    (repo / "book").mkdir(exist_ok=True)
    (repo / "book" / "index.md").write_text("# Demo\n\nThe demo book.\n", encoding="utf-8")
    return repo


def summary(repo: Path, stem: str, suffix: str = ".json") -> dict:
    return json.loads((out_dir(repo) / f"{stem}{suffix}").read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- the four bugs


@pytest.mark.parametrize("damage", ["truncate", "overwrite"])
def test_a_damaged_cache_entry_is_recomputed_quietly(book: Path, damage: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Bug 1: a truncated entry put joblib's traceback (with local paths) on the page and counted as
    served by the cache; bug 2: an entry overwritten in place gave a silently wrong figure."""
    assert cli.main(["run", "cached"]) == 0
    good = summary(book, "cached")["measured"]["error"]
    (entry,) = (book / "cache" / "entries" / "ista").iterdir()
    result = entry / "result.pkl"
    data = bytearray(result.read_bytes())
    if damage == "truncate":
        result.write_bytes(bytes(data[:len(data) // 2]))
    else:
        middle = len(data) // 2
        data[middle:middle + 2048] = np.random.RandomState(1).bytes(2048)
        result.write_bytes(bytes(data))
    capsys.readouterr()
    assert cli.main(["run", "cached", "--force"]) == 0
    out = capsys.readouterr().out
    assert "cached: recomputed 1 result-cache entries that did not verify (ista: " in out
    data = summary(book, "cached")
    assert data["measured"]["error"] == good
    assert [e["hit"] for e in data["cache"]] == [False]
    page = nbformat.read(out_dir(book) / "cached.ipynb", as_version=4)
    text = json.dumps(page)
    assert "Exception while loading" not in text and "Traceback" not in text and str(book) not in text
    assert not any(c.metadata.get("tags") == ["grokkit-banner"] for c in page.cells)  # nothing came from the cache
    assert cli.main(["status", "cached"]) == 0
    assert "up to date" in capsys.readouterr().out
    assert cli.main(["run", "cached", "--force"]) == 0  # the replaced entry serves the next run
    assert [e["hit"] for e in summary(book, "cached")["cache"]] == [True]


def test_a_page_that_cannot_be_published_is_kept_and_the_run_ends_cleanly(
        book: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Bug 4: an output folder made unwritable during `grokkit run all` gave an uncaught
    PermissionError, lost the page and printed no summary. (The tests run as root, whom file modes
    do not stop: the refusal is simulated.)"""
    write = pipeline.atomic_write

    def refuse(path: Path, text: str) -> None:
        if path.name.startswith("nb1"):
            raise PermissionError(13, "Permission denied")
        write(path, text)

    monkeypatch.setattr(pipeline, "atomic_write", refuse)
    monkeypatch.setattr(pipeline.tempfile, "tempdir", str(tmp_path))
    assert cli.main(["run", "nb1", "cached"]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert (f"FAILED nb1: its page could not be written to {out_dir(book)} (Permission denied); the executed page "
            "and its summary are kept in ") in captured.out
    (kept,) = tmp_path.glob("grokkit-rescued-nb1-*")
    assert json.loads((kept / "nb1.json").read_text(encoding="utf-8"))["all_claims_pass"]
    assert nbformat.read(kept / "nb1.ipynb", as_version=4).cells[0].source.startswith("# Tiny notebook")
    assert "cached  preset=quick" in captured.out  # the other page was published
    assert "2 notebook(s) in " in captured.out and "1 of 2 notebooks failed: nb1" in captured.err


def test_an_output_folder_deleted_during_a_run_comes_back(book: Path, tmp_path: Path) -> None:
    """Bug 4: deleting book/generated in the middle of `grokkit run all` raised FileNotFoundError."""
    marker = tmp_path / "started"
    assert cli.main(["run", "nb1"]) == 0
    run = grokkit(book, "run", "slow", "-p", "seconds=4.0", "-p", f"marker={str(marker)!r}")
    wait_for(marker, run)
    shutil.rmtree(book / "book" / "generated")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, out + err
    assert "Traceback" not in out + err and "1 ran, 0 up to date, 0 failed" in out
    paths = pipeline.page_paths(out_dir(book).parent, next(nb for nb in pipeline.discover(book) if nb.stem == "slow"))
    assert pipeline.matching_summary(paths["page"], paths["summary"]) is not None


# ----------------------------------------------------------------------------- the poor cases


def test_a_none_override_is_that_setting(book: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`-p snr=None` and `-p batch_size=None` ran the preset's values under a banner claiming them."""
    assert cli.main(["run", "nones", "-p", "snr=None", "-p", "batch_size=None"]) == 0
    data = summary(book, "nones")
    assert data["parameters"] == {"snr": None, "batch_size": None, "seed": 1}
    assert data["overrides"] == {"snr": None, "batch_size": None}
    page = nbformat.read(out_dir(book) / "nones.ipynb", as_version=4)
    assert "overrides `snr=None`, `batch_size=None`" in page.cells[1].source
    capsys.readouterr()
    assert cli.main(["run", "nones", "-p", "seed=None"]) == 2
    assert ("nones: parameter seed cannot be None (it has no None setting); leave -p seed out to keep the quick "
            "preset's value 1") in capsys.readouterr().err


def test_status_shows_the_last_failure(book: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`grokkit status` after a failed run said "up to date" (a notebook that raises before it
    saves its claims left no failed summary)."""
    assert cli.main(["run", "nb1"]) == 0
    assert cli.main(["run", "nb1", "--force", "-p", "x=10"]) == 1  # claims fail: a failed summary
    assert cli.main(["run", "nb2"]) == 1  # raises before report.save()
    capsys.readouterr()
    assert cli.main(["status", "nb1", "nb2"]) == 0
    nb1, nb2 = capsys.readouterr().out.splitlines()
    assert nb1.split()[:3] == ["nb1", "up", "to"] and "last run FAILED at 20" in nb1 and "AssertionError" in nb1
    assert nb2.split()[:2] == ["nb2", "missing"]
    assert "last run FAILED at 20" in nb2 and "raised ValueError: boom" in nb2
    (out_dir(book) / "nb2.failed.json").write_text('{"started_at": "then", "error": ""}', encoding="utf-8")
    assert cli.main(["status", "nb2"]) == 0  # a failed summary without an error message still shows
    assert "last run FAILED at then" in capsys.readouterr().out


def test_the_book_warns_of_stale_pages(book: Path) -> None:
    assert cli.main(["run", "nb1"]) == 0
    assert pipeline.page_warnings(book) == []
    source = book / "notebooks" / "demo" / "nb1.md"
    source.write_text(source.read_text(encoding="utf-8") + "\nOne more line.\n", encoding="utf-8")
    assert pipeline.page_warnings(book) == [
        "nb1 is stale (notebook edited since it ran): `grokkit run nb1` updates it"]


def test_the_book_is_built_beside_the_last_one_and_swapped(book: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`grokkit book` deleted the old HTML before building: an interrupted build left no book."""
    assert cli.main(["run", "nb1", "cached"]) == 0
    assert cli.main(["book"]) == 0
    index = book / "_build" / "html" / "index.html"
    first = index.read_bytes()
    run = subprocess.run

    def failing(command, **kwargs):  # a build that fails half-way: some HTML, exit code 2
        html = Path(command[command.index("--path-output") + 1]) / "_build" / "html"
        html.mkdir(parents=True)
        (html / "index.html").write_text("half a book", encoding="utf-8")
        return subprocess.CompletedProcess(command, 2)

    monkeypatch.setattr(cli.subprocess, "run", failing)
    capsys.readouterr()
    assert cli.main(["book"]) == 2
    assert index.read_bytes() == first
    err = capsys.readouterr().err
    assert f"the book build failed (exit code 2): the last good book is unchanged ({index})" in err
    failed = book / "_build" / f".grokkit-book-{os.getpid()}"
    assert (failed / "_build" / "html" / "index.html").read_text(encoding="utf-8") == "half a book"

    def interrupted(command, **kwargs):
        (Path(command[command.index("--path-output") + 1]) / "_build" / "html").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.subprocess, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli.book(cli.parser().parse_args(["book"]))
    assert index.read_bytes() == first
    assert not failed.exists()  # the next build clears the failed one, and an interrupted build leaves nothing
    monkeypatch.setattr(cli.subprocess, "run", run)
    assert cli.main(["book"]) == 0
    assert not [p for p in (book / "_build").iterdir() if p.name.startswith(".")]


def test_the_book_from_a_folder_that_holds_some_pages(book: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`grokkit book --from DIR` failed with a line per page unless DIR held every page."""
    elsewhere = tmp_path / "runs"
    assert cli.main(["run", "nb1", "--out", str(elsewhere)]) == 0
    capsys.readouterr()
    assert cli.main(["book", "--from", str(elsewhere), "--out", str(tmp_path / "site")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: 1 of the book's 2 pages are not in {elsewhere} and are built as placeholders: cached"]
    html = tmp_path / "site" / "_build" / "html" / "book" / "generated" / "demo"
    assert "x is small" in (html / "nb1.html").read_text(encoding="utf-8")
    placeholder = " ".join(re.sub(r"<[^>]+>", "", (html / "cached.html").read_text(encoding="utf-8")).split())
    assert "Cached notebook" in placeholder and "not in this build" in placeholder
    assert f"grokkit run cached --out {elsewhere}" in placeholder


def test_a_cache_folder_that_is_a_file_is_refused_up_front(book: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (book / "cachefile").write_text("not a folder", encoding="utf-8")
    start = time.perf_counter()
    assert cli.main(["run", "cached", "--cache", str(book / "cachefile")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"grokkit: error: the result cache folder {book / 'cachefile'} is a file, not a folder")
    assert time.perf_counter() - start < 2.0 and not (book / "book" / "generated").exists()


@pytest.mark.parametrize("preset, given, expected", [("quick", None, pipeline.DEFAULT_TIMEOUT),
                                                     ("paper", None, None), ("paper", 60, 60)])
def test_only_the_quick_preset_has_a_default_cell_timeout(book: Path, monkeypatch: pytest.MonkeyPatch,
                                                          preset: str, given: int | None, expected) -> None:
    """A paper preset (Figure 1: about 1450 s in one cell on a good day) must never be killed by
    the 1800 s timeout sized for the quick presets."""
    seen = []
    monkeypatch.setattr(cli.Runner, "run", lambda self, notebooks: (seen.append(self.timeout), ([], None))[1])
    args = ["run", "nb1", "--preset", preset] + ([] if given is None else ["--timeout", str(given)])
    assert cli.main(args) == 0
    assert seen == [expected]


def test_a_run_at_another_preset_says_what_it_did_to_the_book(book: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", "--preset", "paper"]) == 0
    out = capsys.readouterr().out
    assert ("note: nb1's page in the book is now at the paper preset; `make book` and `grokkit run all` run the "
            "quick preset and put the quick page back") in out
    assert cli.main(["run", "nb1"]) == 0
    assert "note: nb1's page in the book was at the paper preset; the quick page replaced it" in capsys.readouterr().out
    assert cli.main(["run", "nb1", "--preset", "paper", "--out", str(book / "runs")]) == 0
    assert "note:" not in capsys.readouterr().out  # outside the book: nothing to say


def test_a_killed_client_leaves_no_worker_and_no_temporary_folder(book: Path, tmp_path: Path) -> None:
    """`kill -9` of `grokkit run` orphaned its worker processes (they ignore SIGTERM) and their
    temporary folders."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    marker = tmp_path / "started"
    run = grokkit(book, "run", "slow", "-p", "seconds=120.0", "-p", f"marker={str(marker)!r}",
                  env={**os.environ, "TMPDIR": str(temporary)})
    wait_for(marker, run)
    (workdir,) = temporary.glob("grokkit-slow-*")
    worker = int((workdir / "pid").read_text(encoding="utf-8"))
    run.kill()
    run.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        try:
            os.kill(worker, 0)
            alive = not Path(f"/proc/{worker}/stat").read_text().split(") ")[1].startswith("Z")
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        if not alive and not workdir.exists():
            break
        assert time.monotonic() < deadline, f"worker {worker} alive: {alive}; {workdir} exists: {workdir.exists()}"
        time.sleep(0.2)


@pytest.mark.parametrize("name, call", [
    ("X", lambda p: gk.kernels.ista(p.X.astype(complex), p.y, alpha=0.1, beta1=1e-3, steps=5)),
    ("y", lambda p: gk.kernels.subgradient(p.X, p.y + 0j, alpha=0.1, beta1=1e-3, steps=5)),
    ("X", lambda p: gk.kernels.matrix.subgradient(np.ones((6, 40), complex), np.ones(6), (5, 8), alpha=0.1,
                                                  beta_star=1e-3, steps=5)),
])
def test_a_complex_input_is_refused_not_made_real(name: str, call) -> None:
    p = gk.data.sparse.problem(40, 3, 15, variance="1/N", seed=2)
    with pytest.raises(ValueError, match=rf"^{name} must be real, got a complex array \(dtype complex128\)"):
        call(p)


def test_a_network_that_does_not_fit_its_task_is_refused() -> None:
    task = gk.data.nets.modular_addition(7, 0.5, seed=0)
    with pytest.raises(ValueError, match=r"model MatrixProductMLP does not fit task 'modular_addition': its forward "
                                         r"pass on inputs of shape \(2, 7\) \(torch.float32\) failed"):
        nets.train(task, nets.MatrixProductMLP(5, 9), "l2", alpha=1e-2, beta=1e-3, steps=2)
    regression = gk.data.nets.teacher_student(d=5, width=10, c=2, n_train=10, n_test=10)
    with pytest.raises(ValueError, match="it has 3 outputs, the task has 2 target columns"):
        nets.train(regression, nets.TwoLayerMLP(5, 8, 3), "l2", alpha=1e-2, beta=1e-3, steps=2)


def test_a_grid_too_large_for_the_machine_is_refused_before_it_is_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    p = gk.data.sparse.problem(100, 5, 30, variance="1/N", seed=0)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"^subgradient: the grid of G = 1,000,000 configurations needs about "
                                         r"[0-9.]+ GB \([0-9.]+ kB per configuration\) and cpu has [0-9.]+ GB "
                                         r"available"):
        gk.kernels.subgradient(p.X, p.y, alpha=np.full(10**6, 0.01), beta1=1e-3, steps=10**6)
    assert time.perf_counter() - start < 20
    monkeypatch.setattr(kernel_run, "available_memory", lambda device: 10**5)
    with pytest.raises(ValueError, match="G = 4 configurations .* and cpu has 0.0 GB available"):
        gk.kernels.ista(p.X, p.y, **gk.kernels.grid(alpha=[0.1, 0.2], beta1=[1e-3, 1e-2]), steps=10**6)
    monkeypatch.setattr(kernel_run, "available_memory", lambda device: 10**3)
    task = gk.data.nets.modular_addition(7, 0.5, seed=0)
    with pytest.raises(ValueError, match="MatrixProductMLP/l2: the grid of G = 1 configurations"):
        nets.train(task, nets.MatrixProductMLP(7, 9), "l2", alpha=1e-2, beta=1e-3, steps=2)


def test_sighup_stops_the_client_cleanly() -> None:
    """A closed terminal (SIGHUP) stops `grokkit run` as SIGTERM does, and workers ignore it."""
    assert signal.getsignal(signal.SIGHUP) is not cli._terminate
    with pytest.raises(cli._Terminated) as stopped:
        cli._terminate(signal.SIGHUP, None)
    assert stopped.value.signum == signal.SIGHUP
    script = ("import signal; from grokkit import pipeline; pipeline.worker_init(); "
              "print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN)")
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True).stdout.strip() == "True"


def test_status_sees_a_run_written_elsewhere(book: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "runs"
    assert cli.main(["run", "nb1", "--out", str(elsewhere)]) == 0
    capsys.readouterr()
    assert cli.main(["status", "nb1"]) == 0
    assert capsys.readouterr().out.split()[:2] == ["nb1", "missing"]
    assert cli.main(["status", "nb1", "--out", str(elsewhere)]) == 0
    assert capsys.readouterr().out.split()[:3] == ["nb1", "up", "to"]
