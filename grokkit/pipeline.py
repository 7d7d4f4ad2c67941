"""Batch regeneration of the book: ``grokkit list``, ``grokkit run``, ``grokkit book``.

The notebook sources are jupytext MyST files ``notebooks/<chapter>/<stem>.md``. ``grokkit run``
executes them with papermill into ``book/generated/<chapter>/<stem>.ipynb`` (the book's pages)
next to a JSON summary written by the notebook's ``report.save()``; ``grokkit book`` checks the
executed notebooks and builds the HTML with Jupyter Book.
"""
from __future__ import annotations

import argparse
import ast
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import jupytext
import nbformat
import papermill
import yaml

from grokkit.report import PRESETS, SUMMARY_ENV

NON_NOTEBOOKS = ("README.md", "index.md")
GENERATED = Path("book") / "generated"
ERROR_CELL_TAG = "papermill-error-cell-tag"
DEFAULT_TIMEOUT = 1800


class UsageError(Exception):
    """Invalid command-line input, reported before anything runs (exit code 2)."""


@dataclass(frozen=True)
class Notebook:
    """One notebook source: ``<chapter>/<stem>.md``."""

    chapter: str
    stem: str
    source: Path


@dataclass
class Outcome:
    """Result of executing one notebook."""

    notebook: Notebook
    ok: bool
    message: str


# ----------------------------------------------------------------------------- discovery


def find_root(start: Path | None = None) -> Path:
    """The directory holding ``_toc.yml``: from ``start`` (default cwd) upward, else the
    parent of the package directory (editable install)."""
    start = (start or Path.cwd()).resolve()
    for directory in (start, *start.parents):
        if (directory / "_toc.yml").is_file():
            return directory
    package_parent = Path(__file__).resolve().parent.parent
    if (package_parent / "_toc.yml").is_file():
        return package_parent
    raise UsageError(f"no _toc.yml found in {start} or its parents: run grokkit inside the repository")


def discover(root: Path) -> list[Notebook]:
    """All notebook sources ``notebooks/<chapter>/<stem>.md``, sorted by chapter and stem."""
    return [
        Notebook(path.parent.name, path.stem, path)
        for path in sorted((root / "notebooks").glob("*/*.md"))
        if path.name not in NON_NOTEBOOKS
    ]


def title_of(path: Path) -> str:
    """Text of the first ``# `` heading outside the front matter and code fences."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].strip() == "---":
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
        lines = lines[end + 1:]
    in_fence = False
    for line in lines:
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and line.startswith("# "):
            return line[2:].strip()
    return ""


def resolve_targets(targets: Sequence[str], notebooks: Sequence[Notebook]) -> list[Notebook]:
    """Notebooks selected by ``all``, a chapter, a stem, a unique stem prefix or a ``.md`` path."""
    chapters = sorted({nb.chapter for nb in notebooks})
    selected: list[Notebook] = []
    for target in targets:
        if target == "all":
            matches = list(notebooks)
        elif target in chapters:
            matches = [nb for nb in notebooks if nb.chapter == target]
        elif target.endswith(".md"):
            matches = [_notebook_at(Path(target))]
        else:
            matches = [nb for nb in notebooks if nb.stem == target] or [
                nb for nb in notebooks if nb.stem.startswith(target)
            ]
            if len(matches) > 1:
                names = ", ".join(nb.stem for nb in matches)
                raise UsageError(f"ambiguous target {target!r}: matches {names}")
        if not matches:
            raise UsageError(
                f"unknown target {target!r}; valid targets: all, chapters: {', '.join(chapters) or '-'}; "
                f"notebooks: {', '.join(nb.stem for nb in notebooks) or '-'}"
            )
        selected += [nb for nb in matches if nb not in selected]
    return selected


def _notebook_at(path: Path) -> Notebook:
    path = path.resolve()
    if not path.is_file():
        raise UsageError(f"no such notebook source: {path}")
    if path.name in NON_NOTEBOOKS:
        raise UsageError(f"{path.name} is not a notebook")
    return Notebook(path.parent.name, path.stem, path)


# ----------------------------------------------------------------------------- parameters


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs; VALUE is a Python literal when it parses as one, else a string."""
    overrides: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"parameter must look like NAME=VALUE, got {item!r}")
        if name == "preset":
            raise UsageError("use --preset to choose the preset, not -p preset=...")
        try:
            overrides[name] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            overrides[name] = raw
    return overrides


def parameter_names(nb: nbformat.NotebookNode, label: str) -> set[str]:
    """Names assigned in the cell tagged ``parameters``."""
    cell = next((c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise UsageError(f"{label}: no cell tagged 'parameters'")
    try:
        tree = ast.parse(cell.source)
    except SyntaxError as err:
        raise UsageError(f"{label}: the parameters cell is not valid Python: {err}") from err
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def check_parameters(notebooks: Sequence[Notebook], overrides: dict[str, Any]) -> None:
    """Every selected notebook must define ``preset`` and every overridden name."""
    for nb in notebooks:
        try:
            source = jupytext.read(nb.source)
        except Exception as err:  # jupytext raises several types for malformed MyST
            raise UsageError(f"{nb.stem}: cannot read {nb.source}: {err}") from None
        valid = parameter_names(source, nb.stem)
        if "preset" not in valid:
            raise UsageError(f"{nb.stem}: the parameters cell must define 'preset'")
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise UsageError(
                f"{nb.stem}: unknown parameter {', '.join(unknown)}; "
                f"valid parameters: {', '.join(sorted(valid))}"
            )


# ----------------------------------------------------------------------------- execution


def git_revision(root: Path) -> str:
    """``git rev-parse HEAD``, with ``-dirty`` for uncommitted changes; "unknown" without git."""
    try:
        head = _git(root, "rev-parse", "HEAD").strip()
        dirty = _git(root, "status", "--porcelain").strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout


def _relative(path: Path, root: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _finite(value: Any) -> Any:
    """Copy with NaN and infinities replaced by None (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def tidy(path: Path, source: Path, root: Path) -> None:
    """Drop run-specific papermill/nbclient metadata (timings, absolute paths) so outputs do
    not churn, and hide the input of the injected-parameters cell."""
    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata.get("papermill", {})
    for key in ("start_time", "end_time", "duration", "exception"):
        meta.pop(key, None)
    meta["input_path"] = _relative(source, root)
    meta["output_path"] = _relative(path, root)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "hide-input" not in tags:
            cell.metadata["tags"] = [*tags, "hide-input"]
    nbformat.write(nb, path)


def execute(nb: Notebook, root: Path, out: Path, preset: str, overrides: dict[str, Any], timeout: int) -> Outcome:
    """Run one notebook with papermill and complete its JSON summary."""
    directory = out / nb.chapter
    directory.mkdir(parents=True, exist_ok=True)
    executed, summary = directory / f"{nb.stem}.ipynb", directory / f"{nb.stem}.json"
    failed, failed_summary = directory / f"{nb.stem}.failed.ipynb", directory / f"{nb.stem}.failed.json"
    for stale in (summary, failed, failed_summary):
        stale.unlink(missing_ok=True)

    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    revision = git_revision(root)  # the code that runs, even if the repository changes meanwhile
    previous = os.environ.get(SUMMARY_ENV)
    os.environ[SUMMARY_ENV] = str(summary)
    start = time.perf_counter()
    reason = None
    try:
        with tempfile.TemporaryDirectory(prefix="grokkit-run-") as cwd:
            papermill.execute_notebook(
                jupytext.read(nb.source),
                str(executed),
                parameters={"preset": preset, **overrides},
                kernel_name="python3",
                cwd=cwd,
                progress_bar=sys.stdout.isatty(),
                execution_timeout=timeout,
                log_output=False,
            )
    except papermill.PapermillExecutionError as err:
        reason = f"cell {err.cell_index} (execution count {err.exec_count}) raised {err.ename}: {err.evalue}"
    except Exception as err:  # kernel death, cell timeout: keep going with the other notebooks
        reason = f"{type(err).__name__}: {err}"
    finally:
        duration = time.perf_counter() - start
        if previous is None:
            os.environ.pop(SUMMARY_ENV, None)
        else:
            os.environ[SUMMARY_ENV] = previous

    if reason is None:
        tidy(executed, nb.source, root)
        if not summary.is_file():
            reason = "notebook did not call report.save()"
    run_info = dict(preset=preset, overrides=overrides, source=_relative(nb.source, root),
                    duration_s=round(duration, 3), git_revision=revision, started_at=started_at)
    if reason is not None:
        if summary.is_file():  # the claims were saved before they failed: keep them as evidence
            _complete(summary, failed_summary, {**run_info, "executed": _relative(failed, root), "error": reason})
            summary.unlink()
        return _fail(nb, executed, failed, reason)
    data = _complete(summary, summary, {**run_info, "executed": _relative(executed, root)})
    claims = data.get("claims", [])
    passed = sum(bool(c.get("pass")) for c in claims)
    line = (
        f"{nb.stem}  preset={preset}  {duration:.1f}s  claims {passed}/{len(claims)} passed  "
        f"{_relative(summary, root)}"
    )
    return Outcome(nb, True, line)


def _complete(summary: Path, target: Path, run_info: dict[str, Any]) -> dict[str, Any]:
    """Add what only the runner knows (preset, overrides, duration, git revision...) to the
    notebook's JSON summary and write it to ``target``."""
    data = {**json.loads(summary.read_text(encoding="utf-8")), **run_info}
    target.write_text(json.dumps(_finite(data), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return data


def _fail(nb: Notebook, executed: Path, failed: Path, reason: str) -> Outcome:
    """Move the partial notebook aside so the book never renders it."""
    if executed.is_file():
        executed.replace(failed)
        where = f"partial notebook: {failed}"
    else:
        where = "no partial notebook was written"
    return Outcome(nb, False, f"FAILED {nb.stem}: {reason}\n  {where}")


def run(args: argparse.Namespace) -> int:
    """``grokkit run``: validate everything, then execute the selected notebooks."""
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    root = find_root()
    notebooks = resolve_targets(args.targets, discover(root))
    overrides = parse_overrides(args.param)
    check_parameters(notebooks, overrides)
    out = Path(args.out).resolve() if args.out else root / GENERATED

    failures = []
    for nb in notebooks:
        outcome = execute(nb, root, out, args.preset, overrides, args.timeout)
        print(outcome.message, flush=True)
        if not outcome.ok:
            failures.append(outcome.notebook.stem)
    if failures:
        print(f"{len(failures)} of {len(notebooks)} notebooks failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


# ----------------------------------------------------------------------------- book


def toc_files(entries: Any) -> Iterator[str]:
    """Every ``file:`` entry of a ``_toc.yml`` structure, in order."""
    if isinstance(entries, dict):
        if "file" in entries:
            yield str(entries["file"])
        for value in entries.values():
            yield from toc_files(value)
    elif isinstance(entries, list):
        for value in entries:
            yield from toc_files(value)


def generated_pages(root: Path) -> list[Path]:
    """The executed notebooks that ``_toc.yml`` lists under ``book/generated/``."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    prefix = GENERATED.as_posix() + "/"
    return [
        (root / entry).with_suffix(".ipynb")
        for entry in toc_files(toc)
        if entry.startswith(prefix)
    ]


def page_problems(root: Path) -> list[str]:
    """Missing executed notebooks, error outputs and papermill error cells."""
    problems = []
    for page in generated_pages(root):
        label = _relative(page, root)
        if not page.is_file():
            problems.append(f"{label} is missing: run `grokkit run all` first")
            continue
        nb = nbformat.read(page, as_version=4)
        for index, cell in enumerate(nb.cells):
            if ERROR_CELL_TAG in cell.metadata.get("tags", []):
                problems.append(f"{label}: cell {index} is a papermill error cell")
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    problems.append(f"{label}: cell {index} has an error output ({output.get('ename')})")
    return problems


def book(args: argparse.Namespace) -> int:
    """``grokkit book``: check the executed notebooks, then build the HTML."""
    root = find_root()
    problems = page_problems(root)
    if problems:
        print("cannot build the book:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    out = Path(args.out).resolve() if args.out else root
    script = Path(sys.executable).parent / "jupyter-book"
    command = [str(script)] if script.is_file() else [
        sys.executable, "-c", "from jupyter_book.cli.main import main; main()"
    ]
    command += ["build", str(root), "--path-output", str(out), "--all", "-W", "-n", "--keep-going"]
    code = subprocess.run(command, check=False).returncode
    if code == 0:
        print(f"Book: {out / '_build' / 'html' / 'index.html'}")
    return code


def list_notebooks(args: argparse.Namespace) -> int:
    """``grokkit list``: chapter, stem and title of every notebook."""
    notebooks = discover(find_root())
    width = max((len(nb.stem) for nb in notebooks), default=0)
    for nb in notebooks:
        print(f"{nb.chapter}  {nb.stem:<{width}}  {title_of(nb.source)}")
    return 0


# ----------------------------------------------------------------------------- CLI


def parser() -> argparse.ArgumentParser:
    """The ``grokkit`` command-line interface."""
    cli = argparse.ArgumentParser(prog="grokkit", description=__doc__.splitlines()[0])
    commands = cli.add_subparsers(dest="command", required=True)

    commands.add_parser("list", help="list the notebooks").set_defaults(func=list_notebooks)

    run_cli = commands.add_parser("run", help="execute notebooks into book/generated/")
    run_cli.add_argument("targets", nargs="+", metavar="TARGET",
                         help="all, a chapter, a notebook stem, a unique stem prefix, or a path to a .md")
    run_cli.add_argument("--preset", choices=PRESETS, default=PRESETS[0],
                         help="parameter preset (default: %(default)s)")
    run_cli.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                         help="override a parameter; VALUE is a Python literal or a string")
    run_cli.add_argument("--out", help="output folder (default: book/generated under the repository)")
    run_cli.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT,
                         help="per-cell timeout in seconds (default: %(default)s)")
    run_cli.set_defaults(func=run)

    book_cli = commands.add_parser("book", help="check the executed notebooks and build the HTML")
    book_cli.add_argument("--out", help="folder that receives _build/ (default: the repository)")
    book_cli.set_defaults(func=book)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``grokkit`` console script; returns the exit code."""
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"grokkit: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
