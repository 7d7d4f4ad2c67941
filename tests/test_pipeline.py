"""Tests of the ``grokkit`` batch runner on tiny notebooks in a throwaway repository."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import nbformat
import pytest

from grokkit import pipeline

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
    (demo / "nb1.md").write_text(NB1, encoding="utf-8")
    (demo / "nb2.md").write_text(NB2, encoding="utf-8")
    (demo / "README.md").write_text("# Not a notebook\n", encoding="utf-8")
    (tmp_path / "notebooks" / "other").mkdir()
    (tmp_path / "notebooks" / "other" / "thing.md").write_text(OTHER, encoding="utf-8")
    monkeypatch.chdir(demo)
    return tmp_path


def stems(notebooks: list[pipeline.Notebook]) -> list[str]:
    return [nb.stem for nb in notebooks]


def test_root_discovery_and_titles(repo: Path) -> None:
    assert pipeline.find_root() == repo
    notebooks = pipeline.discover(repo)
    assert [(nb.chapter, nb.stem) for nb in notebooks] == [("demo", "nb1"), ("demo", "nb2"), ("other", "thing")]
    assert pipeline.title_of(notebooks[0].source) == "Tiny notebook"


def test_list(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert pipeline.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "demo  nb1    Tiny notebook" in out
    assert "README" not in out


@pytest.mark.parametrize(
    ("targets", "expected"),
    [
        (["all"], ["nb1", "nb2", "thing"]),
        (["demo"], ["nb1", "nb2"]),
        (["nb2"], ["nb2"]),
        (["th"], ["thing"]),
        (["nb2", "all"], ["nb2", "nb1", "thing"]),
        (["nb1.md"], ["nb1"]),
    ],
)
def test_resolve_targets(repo: Path, targets: list[str], expected: list[str]) -> None:
    assert stems(pipeline.resolve_targets(targets, pipeline.discover(repo))) == expected


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nope", "unknown target 'nope'; valid targets: all, chapters: demo, other; notebooks: nb1, nb2, thing"),
        ("nb", "ambiguous target 'nb': matches nb1, nb2"),
        ("missing.md", "no such notebook source"),
    ],
)
def test_bad_targets(repo: Path, target: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert pipeline.main(["run", target]) == 2
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
    assert pipeline.main(["run", "all", "-p", "x=3", "-p", "seed=1"]) == 2
    err = capsys.readouterr().err
    assert "nb1: unknown parameter seed; valid parameters: preset, x" in err
    assert not (repo / "book").exists()


def test_missing_parameters_cell(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "notebooks" / "other" / "bare.md").write_text(FRONT_MATTER + "\n# Bare\n", encoding="utf-8")
    assert pipeline.main(["run", "bare"]) == 2
    assert "bare: no cell tagged 'parameters'" in capsys.readouterr().err


def test_unknown_preset_rejected(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        pipeline.main(["run", "nb1", "--preset", "huge"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'huge' (choose from 'quick', 'paper')" in capsys.readouterr().err


def test_run_writes_notebook_and_summary(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert pipeline.main(["run", "nb1", "-p", "x=2.5"]) == 0
    out_dir = repo / "book" / "generated" / "demo"
    line = capsys.readouterr().out
    assert line.startswith("nb1  preset=quick  ") and "claims 2/2 passed  book/generated/demo/nb1.json" in line

    summary = json.loads((out_dir / "nb1.json").read_text(encoding="utf-8"))
    assert summary["parameters"] == {"preset": "quick", "x": 2.5}
    assert summary["preset"] == "quick" and summary["overrides"] == {"x": 2.5}
    assert summary["source"] == "notebooks/demo/nb1.md"
    assert summary["executed"] == "book/generated/demo/nb1.ipynb"
    assert summary["duration_s"] > 0 and summary["started_at"].endswith("+00:00")
    assert summary["git_revision"] == "unknown"  # tmp_path is not a git repository
    assert [c["pass"] for c in summary["claims"]] == [True, True]

    nb = nbformat.read(out_dir / "nb1.ipynb", as_version=4)
    tags = [cell.metadata.get("tags", []) for cell in nb.cells]
    assert ["parameters"] in tags and ["injected-parameters", "hide-input"] in tags
    assert not any("papermill" in cell.metadata or "execution" in cell.metadata for cell in nb.cells)
    assert "start_time" not in nb.metadata.papermill and nb.metadata.papermill.parameters == {"preset": "quick", "x": 2.5}
    assert "PASS  x is small: measured 2.5, expected <= 5" in nb.cells[-1].outputs[0].text
    assert pipeline.page_problems(repo) == ["book/generated/demo/nb2.ipynb is missing: run `grokkit run all` first"]


def test_failure_is_reported_and_moved_aside(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = repo / "book" / "generated" / "demo"
    out_dir.mkdir(parents=True)
    (out_dir / "nb2.json").write_text("{}", encoding="utf-8")  # stale summary of an earlier run
    assert pipeline.main(["run", "nb2"]) == 1
    captured = capsys.readouterr()
    assert "FAILED nb2: cell 3 (execution count 3) raised ValueError: boom" in captured.out
    assert f"partial notebook: {out_dir / 'nb2.failed.ipynb'}" in captured.out
    assert "1 of 1 notebooks failed: nb2" in captured.err
    assert (out_dir / "nb2.failed.ipynb").is_file()
    assert not (out_dir / "nb2.ipynb").exists() and not (out_dir / "nb2.json").exists()


def test_unreadable_notebook_is_a_usage_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = NB1.replace(":tags: [parameters]", "---\ncaption: a: b\n---")
    (repo / "notebooks" / "demo" / "nb1.md").write_text(broken, encoding="utf-8")
    assert pipeline.main(["run", "nb1"]) == 2
    assert "nb1: cannot read" in capsys.readouterr().err


def test_failed_claims_keep_their_summary(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = repo / "book" / "generated" / "demo"
    assert pipeline.main(["run", "nb1", "-p", "x=10"]) == 1
    assert "FAILED nb1: " in capsys.readouterr().out
    summary = json.loads((out_dir / "nb1.failed.json").read_text(encoding="utf-8"))
    assert "AssertionError" in summary["error"] and summary["overrides"] == {"x": 10}
    assert [c["pass"] for c in summary["claims"]] == [False, True]
    assert summary["executed"] == "book/generated/demo/nb1.failed.ipynb"
    assert not (out_dir / "nb1.json").exists() and (out_dir / "nb1.failed.ipynb").is_file()


def test_page_problems_finds_error_outputs(repo: Path) -> None:
    out_dir = repo / "book" / "generated" / "demo"
    out_dir.mkdir(parents=True)
    error = nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=[])
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1", outputs=[error])]), out_dir / "nb1.ipynb")
    marker = nbformat.v4.new_markdown_cell("error", metadata={"tags": ["papermill-error-cell-tag"]})
    nbformat.write(nbformat.v4.new_notebook(cells=[marker]), out_dir / "nb2.ipynb")
    assert pipeline.page_problems(repo) == [
        "book/generated/demo/nb1.ipynb: cell 0 has an error output (ValueError)",
        "book/generated/demo/nb2.ipynb: cell 0 is a papermill error cell",
    ]
    assert pipeline.main(["book"]) == 1


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
