"""Paper-scale records (grokkit.records): ``grokkit run PAGE --preset paper --record`` on a tiny
page in a throwaway repository; a failed claim recorded as a finding; records refused for
another preset, overrides or a dirty checkout; records that do not match their page; stale
records; and a worker that runs other grokkit code."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from grokkit import cli, pipeline, records
from test_pipeline import FRONT_MATTER


# Its claim holds at the quick preset and fails at the paper preset; it draws one figure.
PAGE = FRONT_MATTER + """
# Figure 7 — A tiny page

```{code-cell} ipython3
:tags: [parameters]

preset = "quick"
scale = None
```

```{code-cell} ipython3
---
mystnb:
  figure:
    caption: A line that rises.
    name: fig07
---
import matplotlib.pyplot as plt
from grokkit.report import Report

value = 1.0 if preset == "quick" else 9.0
report = Report("fig07-tiny", {"preset": preset, "value": value})
report.claim_below("value is small", value, 5.0, where="Section 1")
report.check_true("set-up holds", True)
plt.plot([0, 1], [0, value])
plt.show()
report.save()
report.verify()
```
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: index\nchapters:\n"
                                       "  - file: book/generated/demo/fig07-tiny\n", encoding="utf-8")
    (tmp_path / "notebooks" / "demo").mkdir(parents=True)
    (tmp_path / "notebooks" / "demo" / "fig07-tiny.md").write_text(PAGE, encoding="utf-8")
    (tmp_path / "requirements-lock.txt").write_text("numpy==2\n", encoding="utf-8")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "page")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GROKKIT_CACHE", str(tmp_path / ".cache"))
    return tmp_path


def test_a_record_keeps_the_run_its_provenance_and_its_figure(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "fig07-tiny", "--preset", "paper", "--record"]) == 0
    line = capsys.readouterr().out
    assert "RECORDED fig07-tiny at the paper preset" in line and "0/1 of the paper's claims pass; 1 failed" in line
    data = records.read(repo, "demo", "fig07-tiny")
    assert records.problems(repo, "demo", "fig07-tiny", data) == []
    assert records.stale(repo, data) == []
    assert records.verdict(data) == {"passed": 0, "total": 1, "setup_broken": 0, "disagreements": 0}
    assert data["claims"][0]["where"] == "Section 1" and data["parameters"]["value"] == 9.0
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    prov = data["provenance"]
    assert prov["commit"] == head and prov["dirty_files"] == []
    assert prov["wall_s"] > 0 and prov["kernel_cpu_s"] > 0 and prov["started_at"].endswith("+00:00")
    assert prov["machine"]["cores"] >= 1 and prov["machine"]["cpu"] and "numpy" in prov["machine"]["versions"]
    assert len(prov["requirements_lock_sha256"]) == 64 and len(prov["grokkit_sha256"]) == 16
    (figure,) = data["files"]["figures"]
    assert figure["file"] == "fig07-tiny-1.png" and figure["caption"] == "A line that rises."
    folder = repo / records.RECORDS / "demo"
    assert (folder / "fig07-tiny-1.png").read_bytes().startswith(b"\x89PNG")
    assert "image/png" not in (folder / "fig07-tiny.ipynb").read_text(encoding="utf-8")  # small: the PNG is beside it
    # The book's quick page is untouched: the executed paper page went to .cache/paper-pages.
    assert not (repo / pipeline.GENERATED).exists()
    # A current record is not rerun.
    assert cli.main(["run", "fig07-tiny", "--preset", "paper", "--record"]) == 0
    assert "its record is current, skipped" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--record"], "--record keeps paper-scale records: it needs --preset paper, got --preset quick"),
    (["--preset", "paper", "--record", "-p", "scale=2"], "drop the overrides (-p scale)"),
])
def test_a_record_is_the_paper_presets_own_run(repo: Path, capsys: pytest.CaptureFixture[str], argv, message) -> None:
    assert cli.main(["run", "fig07-tiny", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (repo / records.RECORDS).exists()


def test_a_recorded_run_checkpoints_into_the_repository(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Committed with the records, the checkpoints of an unfinished paper-preset run let another
    checkout continue it; the setting does not outlive the run."""
    from grokkit import checkpoint

    monkeypatch.delenv(checkpoint.ENV, raising=False)
    seen = []

    def run(*args):
        seen.append(os.environ.get(checkpoint.ENV))
        return 0

    monkeypatch.setattr(cli, "_run", run)
    assert cli.main(["run", "fig07-tiny", "--preset", "paper", "--record"]) == 0
    assert seen == [str(repo / records.CHECKPOINTS)] and checkpoint.ENV not in os.environ
    monkeypatch.setenv(checkpoint.ENV, str(repo / "elsewhere"))  # unless told otherwise
    assert cli.main(["run", "fig07-tiny", "--preset", "paper", "--record"]) == 0
    assert seen[-1] == str(repo / "elsewhere")


def test_a_dirty_checkout_is_refused_unless_allowed(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = repo / "notebooks" / "demo" / "fig07-tiny.md"
    source.write_text(source.read_text(encoding="utf-8") + "\nEdited.\n", encoding="utf-8")
    assert cli.main(["run", "fig07-tiny", "--preset", "paper", "--record"]) == 2
    assert "uncommitted changes (notebooks/demo/fig07-tiny.md)" in capsys.readouterr().err
    assert cli.main(["run", "fig07-tiny", "--preset", "paper", "--record", "--allow-dirty"]) == 0
    data = records.read(repo, "demo", "fig07-tiny")
    assert data["provenance"]["dirty_files"] == ["notebooks/demo/fig07-tiny.md"]


@pytest.fixture
def recorded(repo: Path) -> Path:
    assert cli.main(["run", "fig07-tiny", "--preset", "paper", "--record"]) == 0
    return repo


def test_a_record_that_does_not_match_its_page_is_a_problem(recorded: Path) -> None:
    folder, data = recorded / records.RECORDS / "demo", records.read(recorded, "demo", "fig07-tiny")
    assert records.problems(recorded, "demo", "fig08-other", data) == [
        "book/paper_runs/demo/fig08-other.json records demo/fig07-tiny, not demo/fig08-other"]
    (folder / "fig07-tiny-1.png").write_bytes(b"\x89PNG altered")
    assert records.problems(recorded, "demo", "fig07-tiny", data) == [
        "book/paper_runs/demo/fig07-tiny.json: its file fig07-tiny-1.png does not match the SHA-256 it records"]
    (folder / "fig07-tiny-1.png").unlink()
    assert "its file 'fig07-tiny-1.png' is missing" in records.problems(recorded, "demo", "fig07-tiny", data)[0]
    (folder / "fig07-tiny.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(records.RecordError, match="fig07-tiny.json is not a readable record"):
        records.read(recorded, "demo", "fig07-tiny")


def test_a_record_is_stale_when_its_page_or_its_code_changed(recorded: Path) -> None:
    data = records.read(recorded, "demo", "fig07-tiny")
    source = recorded / "notebooks" / "demo" / "fig07-tiny.md"
    # its prose (a discussion of the record) is not what ran; its code is
    source.write_text(source.read_text(encoding="utf-8") + "\nThe record says the claim fails.\n", encoding="utf-8")
    assert records.stale(recorded, data) == []
    source.write_text(source.read_text(encoding="utf-8").replace("9.0", "8.0"), encoding="utf-8")
    assert records.stale(recorded, data) == ["the page's code (notebooks/demo/fig07-tiny.md) was edited"]
    # a record written before the code's SHA-256 was kept is stale on any edit of its page
    del data["code_sha256"]
    assert records.stale(recorded, data) == ["the page (notebooks/demo/fig07-tiny.md) was edited"]
    data["source_sha256"] = records._sha256(source.read_bytes())
    data["code"]["grokkit.metrics.first_step_below"] = "0" * 16
    assert records.stale(recorded, data) == [
        "the code its runs depend on changed: grokkit.metrics.first_step_below"]


def test_the_code_of_a_record_is_its_kernels_and_what_they_call() -> None:
    found = records.code(["grokkit.kernels.sparse.subgradient"])
    assert "grokkit.kernels.sparse.subgradient" in found and "grokkit.kernels.sparse.subgradient_step" in found and "grokkit.kernels.run.run" in found
    assert "file:fused.c" in found and "grokkit.plots.new_figure" not in found
    # the C source of the fused steps the runs may take, and only that
    assert "file:fused_matrix.c" in records.code(["grokkit.kernels.matrix.subgradient"])
    assert not [name for name in records.code(["grokkit.theory.sparse.rho"]) if name.startswith("file:")]


def test_a_record_is_never_stale_against_the_functions_dataclasses_generate(recorded: Path) -> None:
    # they have no source (their code object is rebuilt in each process), so the code of a record is the
    # dataclass's own source; records of an earlier grokkit that listed them stay current
    found = records.code(["grokkit.kernels.sparse.subgradient"])
    assert "grokkit.kernels.run.Family" in found
    assert not [name for name in found if "__create_fn__" in name or name.endswith((".__eq__", ".__repr__"))]
    data = records.read(recorded, "demo", "fig07-tiny")
    data["code"] = {**found, "grokkit.kernels.run.Family.__eq__": "0" * 16,
                    "grokkit.kernels.run.__create_fn__.<locals>.__repr__": "0" * 16}
    assert records.stale(recorded, data) == []


def test_a_record_is_stale_when_the_c_source_of_its_fused_steps_changed(recorded: Path) -> None:
    data = records.read(recorded, "demo", "fig07-tiny")
    data["code"] = records.code(["grokkit.kernels.sparse.subgradient"])
    assert records.stale(recorded, data) == []
    data["code"]["file:fused.c"] = "0" * 16
    assert records.stale(recorded, data) == ["the code its runs depend on changed: file:fused.c"]


def test_a_worker_with_other_grokkit_code_publishes_nothing(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    real = pipeline.execute

    def other_worker(task):
        result = real(task)
        result.grokkit_sha256 = "0123456789abcdef"
        return result

    monkeypatch.setattr(pipeline, "execute", other_worker)
    monkeypatch.setattr(cli, "ProcessPoolExecutor", _InlineExecutor)
    assert cli.main(["run", "fig07-tiny"]) == 1
    assert "runs other grokkit code than this checkout (source hash 0123456789abcdef" in capsys.readouterr().out
    assert not (repo / pipeline.GENERATED / "demo" / "fig07-tiny.ipynb").exists()


class _InlineExecutor:
    """A process pool that runs its tasks in this process (so that a patched execute is used)."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def submit(self, fn, *args):
        from concurrent.futures import Future

        future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, *args, **kwargs) -> None:
        pass


def test_records_in_the_repository_read_back() -> None:
    """Every record in book/paper_runs/ matches its page (the book refuses the others)."""
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / records.RECORDS).glob("*/*.json")):
        data = records.read(root, path.parent.name, path.stem)
        assert records.problems(root, path.parent.name, path.stem, data) == [], path
        assert json.loads(path.read_text(encoding="utf-8"))["format"] == records.FORMAT


def test_grokkit_book_refuses_a_record_that_does_not_match_its_page(recorded: Path) -> None:
    assert cli.main(["run", "fig07-tiny"]) == 0  # the quick page the book is built from
    assert pipeline.page_problems(recorded) == []
    (recorded / records.RECORDS / "demo" / "fig07-tiny-1.png").write_bytes(b"altered")
    assert pipeline.page_problems(recorded) == [
        "book/paper_runs/demo/fig07-tiny.json: its file fig07-tiny-1.png does not match the SHA-256 it records"]
