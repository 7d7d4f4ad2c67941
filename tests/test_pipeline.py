"""Tests of the ``grokkit`` batch runner on tiny notebooks in a throwaway repository.

Each fault found by the trial of issue 5 is a test here: interrupted runs (SIGTERM, Ctrl-C),
failed runs over good pages, bad overrides, two runs on one page, unwritable output folders,
runs with overrides, progress without a terminal, the kernel's TCP warning and ``--help``."""
from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from grokkit import cli, pipeline

FRONT_MATTER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""

NB1 = FRONT_MATTER + """
# Tiny notebook

Its claims pass for x < 5.

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
x = None
```

```{code-cell} ipython3
from grokkit.report import Report

value = 1.0 if x is None else float(x)
report = Report("nb1", {"preset": preset, "x": value})
report.claim_below("x is small", value, 5.0)
report.claim_true("x is positive", value > 0)
report.save()
print(report.summary())
report.verify()
```
"""

NB2 = FRONT_MATTER + """
# Failing notebook

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
```

```{code-cell} ipython3
raise ValueError("boom")
```
"""

# Sleeps through a Progress loop; writes `marker` once its kernel runs.
SLOW = FRONT_MATTER + """
# Slow notebook

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
seconds = 1.0
marker = ""
release = ""   # a file: the run holds its page until it exists
```

```{code-cell} ipython3
import time
from pathlib import Path

from grokkit.kernels.run import Progress
from grokkit.report import Report

if marker:
    Path(marker).write_text("started")
bar = Progress("sleep", 20)
for _ in range(20):
    time.sleep(seconds / 20)
    bar.update(1)
bar.close()
for _ in range(1200 if release else 0):
    if Path(release).exists():
        break
    time.sleep(0.1)
Report("slow", {"seconds": seconds}).save()
```
"""

# Parameters with presets, as the book's notebooks declare them.
TYPED = FRONT_MATTER + """
# Typed notebook

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
N = None           # measurements
seed = None
threshold = None   # t1, t2 threshold
steps = None
grid_alpha = None
```

```{code-cell} ipython3
import grokkit as gk

PRESETS = {
    "paper": dict(N=30, seed=1, threshold=1e-3, steps=1_000_000, grid_alpha=[0.01, 0.1]),
    "quick": dict(N=30, seed=1, threshold=1e-3, steps=1_000, grid_alpha=[0.1]),
}
p = gk.resolve(PRESETS, preset, globals())
gk.Report("typed", p).save()
```
"""

OTHER = FRONT_MATTER + """
# Other chapter

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
```
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake repository root with two chapters; the cwd is a subfolder of it."""
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: index\nchapters:\n"
        "  - file: book/generated/demo/nb1\n  - file: book/generated/demo/nb2\n",
        encoding="utf-8",
    )
    demo = tmp_path / "notebooks" / "demo"
    demo.mkdir(parents=True)
    for name, text in (("nb1", NB1), ("nb2", NB2), ("slow", SLOW), ("typed", TYPED)):
        (demo / f"{name}.md").write_text(text, encoding="utf-8")
    (demo / "README.md").write_text("# Not a notebook\n", encoding="utf-8")
    (tmp_path / "notebooks" / "other").mkdir()
    (tmp_path / "notebooks" / "other" / "thing.md").write_text(OTHER, encoding="utf-8")
    monkeypatch.chdir(demo)
    monkeypatch.setenv("GROKKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path


def out_dir(repo: Path) -> Path:
    return repo / "book" / "generated" / "demo"


def stems(notebooks: list[pipeline.Notebook]) -> list[str]:
    return [nb.stem for nb in notebooks]


def grokkit(repo: Path, *args: str, **kwargs) -> subprocess.Popen:
    """``grokkit ARGS`` as a separate process without a terminal, in the fake repository."""
    return subprocess.Popen([sys.executable, "-m", "grokkit.cli", *args], cwd=repo, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def wait_for(path: Path, process: subprocess.Popen | None = None, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process is None or process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")}


# ----------------------------------------------------------------------------- discovery and parameters


def test_root_discovery_and_titles(repo: Path) -> None:
    assert pipeline.find_root() == repo
    notebooks = pipeline.discover(repo)
    assert [(nb.chapter, nb.stem) for nb in notebooks] == [
        ("demo", "nb1"), ("demo", "nb2"), ("demo", "slow"), ("demo", "typed"), ("other", "thing")]
    assert pipeline.title_of(notebooks[0].source) == "Tiny notebook"


def test_list(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "demo  nb1    Tiny notebook" in out
    assert "README" not in out


def test_list_params_prints_each_preset(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["list", "--params", "typed"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "typed: Typed notebook"
    assert lines[1].split() == ["parameter", "quick", "paper", "comment"]
    assert lines[2].split() == ["N", "30", "30", "measurements"]
    assert lines[5].split() == ["steps", "1000", "1000000"]
    assert lines[6].split() == ["grid_alpha", "[0.1]", "[0.01,", "0.1]"]


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        (["all"], ["nb1", "nb2", "slow", "typed", "thing"]),
        (["demo"], ["nb1", "nb2", "slow", "typed"]),
        (["nb2"], ["nb2"]),
        (["th"], ["thing"]),
        (["nb2", "all"], ["nb2", "nb1", "slow", "typed", "thing"]),
        (["nb1.md"], ["nb1"]),
    ],
)
def test_resolve_targets(repo: Path, targets: list[str], expected: list[str]) -> None:
    assert stems(pipeline.resolve_targets(targets, pipeline.discover(repo))) == expected


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nope", "unknown target 'nope'; valid targets: all, chapters: demo, other; "
                 "notebooks: nb1, nb2, slow, typed, thing"),
        ("nb", "ambiguous target 'nb': matches nb1, nb2"),
        ("missing.md", "no such notebook source"),
    ],
)
def test_bad_targets(repo: Path, target: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", target]) == 2
    assert message in capsys.readouterr().err
    assert not (repo / "book").exists()


def test_parse_overrides() -> None:
    parsed = pipeline.parse_overrides(
        ["N=40", "alpha=[0.01,0.1]", "snr=None", "device=cpu", "name = 'a=b'", "flag=True"]
    )
    assert parsed == {"N": 40, "alpha": [0.01, 0.1], "snr": None, "device": "cpu", "name": "a=b", "flag": True}
    for bad in ("N", "=3", "1x=2"):
        with pytest.raises(pipeline.UsageError, match="NAME=VALUE"):
            pipeline.parse_overrides([bad])
    with pytest.raises(pipeline.UsageError, match="--preset"):
        pipeline.parse_overrides(["preset=paper"])


def test_unknown_parameter_rejected_before_running(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", "nb2", "-p", "x=3", "-p", "seed=1"]) == 2
    err = capsys.readouterr().err
    assert "nb1: unknown parameter seed; valid parameters: preset, x" in err
    assert not (repo / "book").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("N=abc", "typed: parameter N must be an integer (the type of its preset value), got 'abc'"),
        ("N=2.5", "typed: parameter N must be an integer (the type of its preset value), got 2.5"),
        ("seed=-1", "typed: seed must be an integer in [0, 2**32 - 1] (a seed), got -1"),
        ("seed=True", "typed: parameter seed must be an integer (the type of its preset value), got True"),
        ("threshold=-1", "typed: threshold must be in (0.0, inf), got -1"),
        ("steps=0", "typed: steps must be an integer in [1, inf), got 0"),
        ("grid_alpha=0.1", "typed: parameter grid_alpha must be a list such as [0.1] "),
        ("grid_alpha=[0.1,-1]", "typed: grid_alpha must be in (0.0, inf), got -1"),
    ],
)
def test_bad_override_refused_before_any_kernel(repo: Path, override: str, message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 5: `-p N=abc`, `-p seed=-1`, `-p threshold=-1` were checked only inside the kernel."""
    start = time.perf_counter()
    assert cli.main(["run", "typed", "-p", override]) == 2
    assert message in capsys.readouterr().err
    assert time.perf_counter() - start < 2.0  # no kernel started (one takes seconds)
    assert not (repo / "book").exists()


def test_none_override_is_refused_where_none_is_no_setting(repo: Path) -> None:
    nb = next(nb for nb in pipeline.discover(repo) if nb.stem == "typed")
    pipeline.check_overrides([nb], "quick", {"N": 40})
    with pytest.raises(pipeline.UsageError, match="parameter seed cannot be None"):
        pipeline.check_overrides([nb], "quick", {"seed": None, "N": 40})


def test_missing_parameters_cell(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "notebooks" / "other" / "bare.md").write_text(FRONT_MATTER + "\n# Bare\n", encoding="utf-8")
    assert cli.main(["run", "bare"]) == 2
    assert "bare: no cell tagged 'parameters'" in capsys.readouterr().err


def test_unknown_preset_rejected(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["run", "nb1", "--preset", "huge"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'huge' (choose from 'quick', 'paper')" in capsys.readouterr().err


def test_unreadable_notebook_is_a_usage_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = NB1.replace(":tags: [parameters]", "---\ncaption: a: b\n---")
    (repo / "notebooks" / "demo" / "nb1.md").write_text(broken, encoding="utf-8")
    assert cli.main(["run", "nb1"]) == 2
    assert "nb1: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--workers", "0"], ["--timeout", "0"], ["--progress-every", "-1"]])
def test_bad_run_options(repo: Path, bad: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", *bad]) == 2
    assert f"{bad[0]} must be" in capsys.readouterr().err


def test_help_has_no_rest_markup(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["run", "--help"], ["book", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = capsys.readouterr().out
        assert "``" not in text and ":func:" not in text and "usage: grokkit" in text


# ----------------------------------------------------------------------------- running and publishing


def test_run_writes_notebook_and_summary(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("nb1  preset=quick  ") and "claims 2/2 passed  book/generated/demo/nb1.json" in line

    summary = json.loads((out_dir(repo) / "nb1.json").read_text(encoding="utf-8"))
    assert summary["parameters"] == {"preset": "quick", "x": 1.0}
    assert summary["preset"] == "quick" and summary["overrides"] == {}
    assert summary["source"] == "notebooks/demo/nb1.md"
    assert summary["executed"] == "book/generated/demo/nb1.ipynb"
    assert summary["duration_s"] > 0 and summary["started_at"].endswith("+00:00")
    assert summary["git_revision"] == "unknown"  # tmp_path is not a git repository
    assert [c["pass"] for c in summary["claims"]] == [True, True]
    assert summary["fingerprint"]["preset"] == "quick" and len(summary["fingerprint"]["grokkit_sha256"]) == 16

    nb = nbformat.read(out_dir(repo) / "nb1.ipynb", as_version=4)
    tags = [cell.metadata.get("tags", []) for cell in nb.cells]
    assert ["parameters"] in tags and ["injected-parameters", "hide-input"] in tags
    assert not any("grokkit-banner" in t for t in tags)  # the preset's own page
    assert not any("papermill" in cell.metadata or "execution" in cell.metadata for cell in nb.cells)
    assert "start_time" not in nb.metadata.papermill and nb.metadata.papermill.parameters == {"preset": "quick"}
    assert "PASS  x is small: measured 1, expected <= 5" in nb.cells[-1].outputs[0].text
    assert pipeline.matching_summary(out_dir(repo) / "nb1.ipynb", out_dir(repo) / "nb1.json") is not None
    assert pipeline.page_problems(repo) == ["book/generated/demo/nb2.ipynb is missing: run `grokkit run all` first"]


def test_second_run_skips_and_rewrites_nothing_until_a_source_changes(repo: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", "typed", "--workers", "2"]) == 0
    before = snapshot(out_dir(repo))
    mtimes = {p.name: p.stat().st_mtime_ns for p in out_dir(repo).iterdir()}
    capsys.readouterr()

    start = time.perf_counter()
    assert cli.main(["run", "nb1", "typed"]) == 0
    assert time.perf_counter() - start < 1.0  # no kernel
    out = capsys.readouterr().out
    assert "nb1  up to date, skipped" in out and "typed  up to date, skipped" in out
    assert "2 notebook(s)" in out and "0 ran, 2 up to date, 0 failed" in out
    assert snapshot(out_dir(repo)) == before
    assert {p.name: p.stat().st_mtime_ns for p in out_dir(repo).iterdir()} == mtimes

    source = repo / "notebooks" / "demo" / "typed.md"  # edit one notebook: only it reruns
    source.write_text(source.read_text(encoding="utf-8").replace("# Typed notebook", "# Typed notebook, edited"),
                      encoding="utf-8")
    assert cli.main(["status", "typed"]) == 0
    assert "stale (notebook edited)" in capsys.readouterr().out
    assert cli.main(["run", "nb1", "typed"]) == 0
    out = capsys.readouterr().out
    assert "nb1  up to date, skipped" in out and "typed  preset=quick" in out
    assert (out_dir(repo) / "nb1.json").read_bytes() == before["nb1.json"]

    assert cli.main(["run", "nb1", "--force"]) == 0  # --force reruns
    assert "nb1  preset=quick" in capsys.readouterr().out


def test_status_lines(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", "-p", "x=2"]) == 0
    capsys.readouterr()
    assert cli.main(["status", "demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].split()[:2] == ["nb1", "up"] and "preset=quick" in lines[0]
    assert "overrides=x=2" in lines[0] and "claims=2/2" in lines[0] and "ran=20" in lines[0]
    assert lines[1].split()[:2] == ["nb2", "missing"]


def test_failed_run_keeps_the_good_page(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 5: `run all -p steps=0` over good outputs replaced them all with .failed.ipynb."""
    assert cli.main(["run", "nb1"]) == 0
    good = snapshot(out_dir(repo))
    capsys.readouterr()
    assert cli.main(["run", "nb1", "-p", "x=10"]) == 1  # its claims fail
    captured = capsys.readouterr()
    assert "FAILED nb1: " in captured.out and "(the published page is unchanged)" in captured.out
    assert "1 of 1 notebooks failed: nb1" in captured.err
    assert {k: v for k, v in snapshot(out_dir(repo)).items() if "failed" not in k} == good
    summary = json.loads((out_dir(repo) / "nb1.failed.json").read_text(encoding="utf-8"))
    assert "AssertionError" in summary["error"] and summary["overrides"] == {"x": 10}
    assert [c["pass"] for c in summary["claims"]] == [False, True]
    assert summary["executed"] == "book/generated/demo/nb1.failed.ipynb"
    assert (out_dir(repo) / "nb1.failed.ipynb").is_file()
    assert cli.main(["status", "nb1"]) == 0
    assert "last run FAILED" in capsys.readouterr().out

    assert cli.main(["run", "nb1", "--force"]) == 0  # a good run clears the evidence
    assert not (out_dir(repo) / "nb1.failed.json").exists()


def test_failure_is_reported_by_cell(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb2"]) == 1
    captured = capsys.readouterr()
    assert "FAILED nb2: cell 3 (execution count 3) raised ValueError: boom" in captured.out
    assert f"partial notebook: {out_dir(repo) / 'nb2.failed.ipynb'}" in captured.out
    assert not (out_dir(repo) / "nb2.ipynb").exists() and not (out_dir(repo) / "nb2.json").exists()


def test_override_page_has_a_banner_and_the_book_warns(repo: Path) -> None:
    """Issue 5: `run fig02 -p seed=3 -p N=40` silently replaced the book's page."""
    assert cli.main(["run", "nb1", "-p", "x=2.5"]) == 0
    nb = nbformat.read(out_dir(repo) / "nb1.ipynb", as_version=4)
    assert nb.cells[0].source.startswith("# Tiny notebook")
    banner = nb.cells[1]
    assert banner.metadata.tags == ["grokkit-banner"] and "overrides `x=2.5`" in banner.source
    assert "`grokkit run nb1 --preset quick` restores it" in banner.source
    assert pipeline.page_warnings(repo) == ["nb1 was run with overrides (x=2.5): it is not the quick preset's page"]


@pytest.mark.parametrize("folder", ["file", "unwritable"])
def test_unwritable_output_folder(repo: Path, folder: str, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 5: a read-only book/generated, or --out naming a file, gave a raw traceback."""
    target = repo / "somewhere"
    if folder == "file":
        target.write_text("not a folder", encoding="utf-8")
        expected = f"grokkit: error: output folder {target} is a file, not a folder"
    else:  # the tests run as root, whom file modes do not stop: the OS's refusal is simulated
        def refuse(*args, **kwargs):
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr(pipeline.tempfile, "TemporaryFile", refuse)
        expected = f"grokkit: error: cannot write to output folder {target}: Permission denied"
    assert cli.main(["run", "nb1", "--out", str(target), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == expected and "Traceback" not in err


def test_book_refuses_pages_without_a_matching_summary(repo: Path) -> None:
    """Issue 5: an interrupted run left a half-empty page that `grokkit book` published."""
    assert cli.main(["run", "nb1"]) == 0
    page = out_dir(repo) / "nb1.ipynb"
    page.write_text(page.read_text(encoding="utf-8").replace("Tiny notebook", "Half a notebook"), encoding="utf-8")
    (out_dir(repo) / "nb2.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()), encoding="utf-8")
    assert pipeline.page_problems(repo) == [
        "book/generated/demo/nb1.ipynb has no matching complete summary (an interrupted or edited run): "
        "rerun `grokkit run nb1`",
        "book/generated/demo/nb2.ipynb has no matching complete summary (an interrupted or edited run): "
        "rerun `grokkit run nb2`",
    ]
    assert cli.main(["book"]) == 1


def test_page_problems_finds_error_outputs(repo: Path) -> None:
    out = out_dir(repo)
    out.mkdir(parents=True)
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=[])
    marker = nbformat.v4.new_markdown_cell("error", metadata={"tags": ["papermill-error-cell-tag"]})
    for name, nb in (("nb1", nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1", outputs=[error])])),
                     ("nb2", nbformat.v4.new_notebook(cells=[marker]))):
        text = nbformat.writes(nb)
        (out / f"{name}.ipynb").write_text(text, encoding="utf-8")
        (out / f"{name}.json").write_text(json.dumps({"page_sha256": pipeline._sha256(text.encode())}),
                                          encoding="utf-8")
    assert pipeline.page_problems(repo) == [
        "book/generated/demo/nb1.ipynb: cell 0 has an error output (ValueError)",
        "book/generated/demo/nb2.ipynb: cell 0 is a papermill error cell",
    ]


# ----------------------------------------------------------------------------- runs as a user sees them


def test_progress_reaches_a_run_without_a_terminal(repo: Path) -> None:
    """Issue 5: nothing was printed for 10 minutes of a paper-scale run without a terminal.
    Also: no kernel TCP-encryption warning on every run."""
    run = grokkit(repo, "run", "slow", "-p", "seconds=6.0", "--progress-every", "2")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    progress = [line for line in out.splitlines() if line.startswith("  ... slow: running for")]
    assert progress and any("; sleep " in line and "% (" in line and "of 20 steps)" in line for line in progress)
    assert out.splitlines()[-1].startswith("1 notebook(s) in ")
    assert "TCP without encryption" not in err and "TCP without encryption" not in out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_interrupted_run_publishes_nothing_and_says_how_to_resume(repo: Path, sig: int, tmp_path: Path) -> None:
    """Issue 5: SIGTERM left a half-run page that the book published; Ctrl-C printed a
    62-line traceback. The run starts with SIGINT ignored, as it came, now and then, from the
    test suite's worker processes: Python then raises no KeyboardInterrupt, and the run went on
    to the end unless `grokkit run` installs its own handler."""
    assert cli.main(["run", "nb1"]) == 0
    good = snapshot(out_dir(repo))
    marker = tmp_path / "started"
    run = grokkit(repo, "run", "slow", "-p", "seconds=60.0", "-p", f"marker={str(marker)!r}",
                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    wait_for(marker, run)
    run.send_signal(sig)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 128 + sig
    assert err.strip().splitlines() == [
        "grokkit: interrupted; finished: none; interrupted or not started: slow (their pages are unchanged); "
        "run the same command again to finish the rest (finished pages are skipped)"]
    assert "Traceback" not in out
    assert snapshot(out_dir(repo)) == good  # nothing published, nothing lost
    slow = next(nb for nb in pipeline.discover(repo) if nb.stem == "slow")
    assert pipeline.page_status(out_dir(repo).parent, slow)["state"] == "missing"


def test_run_restores_the_signal_handlers_it_found(repo: Path) -> None:
    """`grokkit run` handles Ctrl-C and SIGTERM itself, then puts back what it found (its
    clean-up ignores SIGINT: that must not outlive it in a process that goes on)."""
    def mine(signum, frame):
        raise AssertionError

    before = signal.signal(signal.SIGINT, mine), signal.signal(signal.SIGTERM, mine)
    try:
        assert cli.main(["run", "nb1"]) == 0
        assert signal.getsignal(signal.SIGINT) is mine and signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_a_run_leaves_the_environment_it_found(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's settings (where it writes its summary and progress, its page) do not outlive a
    run in this process: a later kernel call would write its progress into the current folder."""
    monkeypatch.delenv(pipeline.PROGRESS_ENV, raising=False)
    monkeypatch.setenv(pipeline.SUMMARY_ENV, "mine.json")
    assert cli.main(["run", "nb1"]) == 0
    assert pipeline.PROGRESS_ENV not in os.environ and os.environ[pipeline.SUMMARY_ENV] == "mine.json"


def test_two_runs_at_once_on_one_page(repo: Path, tmp_path: Path) -> None:
    """Issue 5: two `grokkit run` on one folder gave a false failure or two results."""
    marker, release = tmp_path / "started", tmp_path / "release"
    # The first run holds the page until the second has said that it waits for it: no race with
    # the second's start-up, however loaded the machine.
    args = ("run", "slow", "-p", "seconds=0.5", "-p", f"marker={str(marker)!r}",
            "-p", f"release={str(release)!r}")
    first = grokkit(repo, *args)
    wait_for(marker, first)
    second = grokkit(repo, *args)
    said = []
    while not any("waiting for it" in line for line in said):
        line = second.stdout.readline()
        assert line, second.communicate()  # the second ended without waiting
        said.append(line)
    release.write_text("go")
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    out2 = "".join(said) + out2
    assert first.returncode == 0 and second.returncode == 0, err1 + err2
    assert "slow  preset=quick" in out1
    assert "slow: another grokkit run is writing this page; waiting for it" in out2
    assert "slow  up to date, skipped" in out2
    paths = pipeline.page_paths(out_dir(repo).parent, pipeline.discover(repo)[2])
    assert pipeline.matching_summary(paths["page"], paths["summary"]) is not None


# ----------------------------------------------------------------------------- book from elsewhere


def test_book_from_another_folder(repo: Path, tmp_path: Path) -> None:
    (repo / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n"
                                   "  - file: book/generated/demo/nb1\n", encoding="utf-8")
    (repo / "_config.yml").write_text("title: demo\nexecute:\n  execute_notebooks: \"off\"\n"
                                      "only_build_toc_files: true\n", encoding="utf-8")
    (repo / "book").mkdir()
    (repo / "book" / "index.md").write_text("# Demo\n\nThe demo book.\n", encoding="utf-8")
    elsewhere = tmp_path / "runs"
    assert cli.main(["run", "nb1", "--out", str(elsewhere)]) == 0
    assert not (repo / "book" / "generated").exists()
    assert cli.main(["book", "--from", str(elsewhere), "--out", str(tmp_path / "site")]) == 0
    html = (tmp_path / "site" / "_build" / "html" / "book" / "generated" / "demo" / "nb1.html").read_text(
        encoding="utf-8")
    assert "Tiny notebook" in html and "x is small" in html


# ----------------------------------------------------------------------------- Dask


@pytest.fixture
def local_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  host="127.0.0.1") as cluster:
        yield cluster


def test_run_on_a_dask_local_cluster(repo: Path, local_cluster, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", "nb2", "--scheduler", local_cluster.scheduler_address]) == 1
    out = capsys.readouterr().out
    assert "nb1  preset=quick" in out and "FAILED nb2: cell 3 (execution count 3) raised ValueError: boom" in out
    summary = json.loads((out_dir(repo) / "nb1.json").read_text(encoding="utf-8"))
    assert [c["pass"] for c in summary["claims"]] == [True, True]
    assert (out_dir(repo) / "nb2.failed.ipynb").is_file()


def test_dask_worker_death_is_reported_by_name(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    distributed = pytest.importorskip("distributed")
    import dask

    killer = FRONT_MATTER + ("\n# Killer\n\n```{code-cell} ipython3\n:tags: [parameters]\n\npreset = \"quick\"\n"
                             "```\n\n```{code-cell} ipython3\nimport os, signal\n"
                             "os.kill(int(os.environ['JPY_PARENT_PID']), signal.SIGKILL)\n```\n")
    (repo / "notebooks" / "demo" / "killer.md").write_text(killer, encoding="utf-8")
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                      host="127.0.0.1") as cluster:
            assert cli.main(["run", "killer", "--scheduler", cluster.scheduler_address]) == 1
    out = capsys.readouterr().out
    assert "FAILED killer: the Dask workers running it died" in out and "KilledWorker" in out
    assert not (out_dir(repo) / "killer.ipynb").exists()


def test_unreachable_scheduler_is_a_usage_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err


def test_real_dask_scheduler_and_worker(repo: Path, tmp_path: Path) -> None:
    """`dask scheduler` and `dask worker` started as processes in another folder, on 127.0.0.1."""
    pytest.importorskip("distributed")
    elsewhere = tmp_path / "cluster"
    elsewhere.mkdir()
    scheduler_file = elsewhere / "scheduler.json"
    dask = [str(Path(sys.executable).parent / "dask")]
    env = {**os.environ, "GROKKIT_CACHE": ""}
    scheduler = subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(scheduler_file)], cwd=elsewhere, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = None
    try:
        wait_for(scheduler_file)
        address = json.loads(scheduler_file.read_text(encoding="utf-8"))["address"]
        worker = subprocess.Popen([*dask, "worker", address, "--nthreads", "1", "--nworkers", "1",
                                   "--no-dashboard", "--host", "127.0.0.1"], cwd=elsewhere, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run = grokkit(repo, "run", "nb1", "--scheduler", address)
        out, err = run.communicate(timeout=180)
        assert run.returncode == 0, out + err
        assert "nb1  preset=quick" in out
        summary = json.loads((out_dir(repo) / "nb1.json").read_text(encoding="utf-8"))
        assert summary["all_claims_pass"] is True
        assert pipeline.page_problems(repo) == ["book/generated/demo/nb2.ipynb is missing: run `grokkit run all` first"]
    finally:
        for process in (worker, scheduler):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)


# ----------------------------------------------------------------------------- git


def test_git_revision(tmp_path: Path) -> None:
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "f").write_text("1", encoding="utf-8")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    assert pipeline.git_revision(tmp_path) == head
    (tmp_path / "f").write_text("2", encoding="utf-8")
    assert pipeline.git_revision(tmp_path) == head + "-dirty"


def test_banner_names_runs_served_by_the_cache() -> None:
    events = [{"function": "subgradient", "hit": True}, {"function": "basis_pursuit", "hit": False}]
    (note,) = pipeline.banners("quick", {}, events, "fig02")
    assert note.startswith(":::{note}\n1 of the 2 cached runs behind this page came from the result cache")
    assert note.endswith(": subgradient.\n:::")
    assert pipeline.banners("quick", {}, [{"function": "ista", "hit": False}], "fig02") == []


def test_worker_init_caps_the_blas_threads_of_the_kernels_unless_the_user_set_them():
    """grokkit run's local workers size the BLAS/OpenMP pools of the notebooks they run to their
    share of the cores; a variable the user set is kept. (In a subprocess: worker_init also
    installs signal handlers.)"""
    code = ("import os; from grokkit import pipeline; pipeline.worker_init(3); "
            "print(*[os.environ[k] for k in pipeline.BLAS_THREAD_VARIABLES])")
    env = {k: v for k, v in os.environ.items() if k not in pipeline.BLAS_THREAD_VARIABLES}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3", "3", "3"]
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["3", "2", "3"]


# A kernel run that starts after the deadline: it stops at its first record, checkpointed.
LONG = FRONT_MATTER + """
# Long notebook

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
```

```{code-cell} ipython3
import time

import grokkit as gk
from grokkit import checkpoint

due = checkpoint.deadline()
if due is not None:
    time.sleep(max(0.0, due - time.time()) + 0.5)
p = gk.data.sparse.problem(30, 3, 12, seed=0)
traj = gk.kernels.subgradient(p.X, p.y, alpha=0.1, beta1=1e-3, steps=20_000, b_star=p.b_star, device="cpu")
report = gk.Report("long", {"preset": preset})
report.claim_below("final error", float(traj.train_error[0, -1]), 1e-2)
report.save()
```
"""


def test_a_run_stopped_at_the_deadline_is_continued_by_the_same_command(repo: Path) -> None:
    """`grokkit run --deadline`: the kernel run crosses the deadline, saves its state and stops; the
    page is not published and the run exits 75; the same command without the deadline continues
    it (the page says so) and deletes the checkpoint."""
    (repo / "notebooks" / "demo" / "long.md").write_text(LONG, encoding="utf-8")
    run = grokkit(repo, "run", "long", "nb1", "--workers", "1", "--deadline", "20s")
    out, err = run.communicate(timeout=300)
    assert run.returncode == cli.EX_TEMPFAIL, out + err
    assert re.search(r"STOPPED long at the deadline, its page unchanged: subgradient: stopped at the deadline "
                     r"\(\$GROKKIT_DEADLINE\) at step 0 of 20,000; its state is saved in \S+\.ckpt", out), out
    assert "STOPPED nb1: not started, the deadline has passed" in out
    assert "stopped at the deadline: " in err and "run the same command again to continue them" in err
    (saved,) = (repo / "cache" / "checkpoints").rglob("*.ckpt")
    assert not (out_dir(repo) / "long.ipynb").exists()
    listing = grokkit(repo, "cache", "info").communicate(timeout=60)[0]
    assert "checkpoints of unfinished runs" in listing and "subgradient: step 0 of 20,000" in listing
    run = grokkit(repo, "run", "long")
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, out + err
    assert not saved.exists()
    page = (out_dir(repo) / "long.ipynb").read_text(encoding="utf-8")
    assert "1 run(s) behind this page continued from a checkpoint" in page and "from step 0 of 20,000" in page


@pytest.mark.parametrize("bad, message", [(["--deadline", "soon"], "--deadline must be a duration such as"),
                                          (["--deadline", "1h", "--no-cache"], "--deadline keeps the state")])
def test_bad_deadlines_are_usage_errors(repo: Path, bad: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "nb1", *bad]) == 2
    assert message in capsys.readouterr().err
