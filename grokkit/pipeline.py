"""Batch regeneration of the book: finding notebooks, checking parameters, executing them
(locally in parallel or on a Dask cluster), publishing their pages, and checking pages.

The sources are jupytext MyST files ``notebooks/<chapter>/<stem>.md``. A run executes one with
papermill in a folder of its own (:func:`execute`, which also runs on a Dask worker and
returns everything as data), and the client publishes the result (:func:`publish`): the page
``<out>/<chapter>/<stem>.ipynb`` and its JSON summary ``<stem>.json`` reach their final paths
only complete, each by an atomic rename, under a lock per page. A failed run leaves its
evidence beside the page (``<stem>.failed.ipynb``, ``<stem>.failed.json``) and never touches
a good page. A page whose summary records the same fingerprint (notebook source, preset,
overrides, grokkit source) is up to date and skipped. The command line is :mod:`grokkit.cli`.
"""
from __future__ import annotations

import ast
import hashlib
import json
import logging
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import jupytext
import nbformat
import papermill
import yaml

from grokkit import cache, checkpoint
from grokkit.kernels.run import PROGRESS_ENV
from grokkit.report import NONE_OVERRIDES, PARAMETER_CHECKS, PRESETS, SUMMARY_ENV, check_parameters

NON_NOTEBOOKS = ("README.md", "index.md")
GENERATED = Path("book") / "generated"
ERROR_CELL_TAG = "papermill-error-cell-tag"
BANNER_TAG = "grokkit-banner"
DEFAULT_TIMEOUT = 1800   # per cell at the quick preset; the paper preset has none
QUICK_BUDGET_S = 30
SUMMARY_NAME = "grokkit-summary.json"    # in the notebook's own working folder
PROGRESS_NAME = "grokkit-progress.json"
# Kernel logs are noise here: ipykernel 7 warns on every start that its local TCP sockets are
# unencrypted, and logs a traceback when an interrupted run shuts it down mid-message.
KERNEL_ARGUMENTS = ["--IPKernelApp.log_level=CRITICAL"]


class UsageError(Exception):
    """Invalid input, reported before anything runs (exit code 2)."""


@dataclass(frozen=True)
class Notebook:
    """One notebook source: ``<chapter>/<stem>.md``."""

    chapter: str
    stem: str
    source: Path


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


@dataclass
class Parameters:
    """What a notebook declares: the names of its parameters cell with their comments, and the
    ``PRESETS = {...}`` it resolves them from (literals only)."""

    names: dict[str, str]
    presets: dict[str, dict[str, Any]] = field(default_factory=dict)


def _literal(node: ast.AST) -> Any:
    """A literal, where ``dict(k=v, ...)`` counts as the dict literal it spells."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
            and not node.args and all(k.arg for k in node.keywords):
        return {k.arg: _literal(k.value) for k in node.keywords}
    if isinstance(node, ast.Dict):
        return {ast.literal_eval(k): _literal(v) for k, v in zip(node.keys, node.values)}
    return ast.literal_eval(node)


def read_parameters(nb: Notebook) -> Parameters:
    """The :class:`Parameters` of ``nb``; a :class:`UsageError` if it has no valid parameters cell."""
    try:
        source = jupytext.read(nb.source)
    except Exception as err:  # jupytext raises several types for malformed MyST
        raise UsageError(f"{nb.stem}: cannot read {nb.source}: {err}") from None
    cells = [c for c in source.cells if c.cell_type == "code"]
    index = next((i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if index is None:
        raise UsageError(f"{nb.stem}: no cell tagged 'parameters'")
    try:
        tree = ast.parse(cells[index].source)
    except SyntaxError as err:
        raise UsageError(f"{nb.stem}: the parameters cell is not valid Python: {err}") from err
    lines = cells[index].source.splitlines()
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            comment = lines[node.lineno - 1].partition("#")[2].strip()
            for target in getattr(node, "targets", None) or [node.target]:
                names.update({n.id: comment for n in ast.walk(target) if isinstance(n, ast.Name)})
    if "preset" not in names:
        raise UsageError(f"{nb.stem}: the parameters cell must define 'preset'")
    presets: dict[str, dict[str, Any]] = {}
    for cell in cells[index + 1:]:
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PRESETS"
                                                    for t in node.targets):
                try:
                    presets = _literal(node.value)
                except (ValueError, TypeError, SyntaxError):
                    raise UsageError(f"{nb.stem}: PRESETS must be written with literals only") from None
    return Parameters(names, presets)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "True or False"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "a list such as " + repr(list(value))
    return f"a {type(value).__name__}"


def _same_type(value: Any, like: Any) -> bool:
    if isinstance(like, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(like, bool)
    if isinstance(like, int):
        return isinstance(value, int)
    if isinstance(like, float):
        return isinstance(value, (int, float))
    if isinstance(like, (list, tuple)):
        return isinstance(value, (list, tuple)) and len(value) > 0
    return isinstance(value, type(like))


def check_overrides(notebooks: Sequence[Notebook], preset: str, overrides: dict[str, Any]) -> None:
    """Before any kernel starts: every overridden name exists in each notebook's parameters
    cell, has the type of the preset's value, and lies in the range of
    :data:`grokkit.report.PARAMETER_CHECKS`; each message names the parameter."""
    for nb in notebooks:
        params = read_parameters(nb)
        unknown = sorted(set(overrides) - set(params.names))
        if unknown:
            raise UsageError(
                f"{nb.stem}: unknown parameter {', '.join(unknown)}; "
                f"valid parameters: {', '.join(sorted(params.names))}"
            )
        if params.presets and preset not in params.presets:
            raise UsageError(f"{nb.stem}: no preset {preset!r}; its presets: {', '.join(params.presets)}")
        for name, value in overrides.items():
            likes = [p[name] for p in (params.presets.get(preset, {}), *params.presets.values())
                     if p.get(name) is not None]
            if value is None and not _takes_none(name, params):
                preset_value = params.presets.get(preset, {}).get(name, "its default")
                raise UsageError(f"{nb.stem}: parameter {name} cannot be None (it has no None setting); leave "
                                 f"-p {name} out to keep the {preset} preset's value {preset_value!r}")
            if value is not None and likes and not _same_type(value, likes[0]):
                raise UsageError(f"{nb.stem}: parameter {name} must be {_type_name(likes[0])} "
                                 f"(the type of its preset value), got {value!r}")
        try:
            check_parameters({k: v for k, v in overrides.items() if v is not None})
        except (ValueError, TypeError) as err:
            raise UsageError(f"{nb.stem}: {err}") from None


def _takes_none(name: str, params: Parameters) -> bool:
    """Whether None is a setting of the parameter ``name`` (``snr=None`` noiseless, ``batch_size=None``
    the full batch): a preset sets it to None, or its range check accepts None."""
    if any(name in p and p[name] is None for p in params.presets.values()):
        return True
    if PARAMETER_CHECKS.get(name) is None and PARAMETER_CHECKS.get(name.partition("_")[2]) is None:
        return False
    try:
        check_parameters({name: None})
    except (ValueError, TypeError):
        return False
    return True


# ----------------------------------------------------------------------------- fingerprints


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become None, tuples lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def fingerprint(nb: Notebook, preset: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """What a page depends on: its source, the preset, the overrides and grokkit's source code."""
    return {"source_sha256": _sha256(nb.source.read_bytes())[:16], "grokkit_sha256": cache.source_hash(),
            "preset": preset, "overrides": _canonical(overrides)}


def page_paths(out: Path, nb: Notebook) -> dict[str, Path]:
    """The page, its summary, the evidence of a failed run, and the page's lock."""
    d = out / nb.chapter
    return {"page": d / f"{nb.stem}.ipynb", "summary": d / f"{nb.stem}.json",
            "failed_page": d / f"{nb.stem}.failed.ipynb", "failed_summary": d / f"{nb.stem}.failed.json",
            "lock": d / f".{nb.stem}.lock"}


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object at ``path`` (a summary, a progress record), or None if missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def matching_summary(page: Path, summary: Path) -> dict[str, Any] | None:
    """The summary of ``page`` if it is complete and records this very page (its SHA-256)."""
    data = read_json(summary)
    if data is None or not page.is_file() or data.get("page_sha256") != _sha256(page.read_bytes()):
        return None
    return data


def up_to_date(out: Path, nb: Notebook, preset: str, overrides: dict[str, Any]) -> bool:
    """Whether the published page was made from this source, preset, overrides and grokkit."""
    paths = page_paths(out, nb)
    data = matching_summary(paths["page"], paths["summary"])
    return data is not None and data.get("fingerprint") == fingerprint(nb, preset, overrides)


# ----------------------------------------------------------------------------- execution


@dataclass(frozen=True)
class Task:
    """Everything a worker needs to execute one notebook; it travels to Dask workers.

    ``cache`` is the result-cache folder for the kernel, ``""`` for none, None to keep the
    worker's own ``$GROKKIT_CACHE``; ``workdir`` is the kernel's working folder (the client
    reads its progress there), None for a temporary one; ``deadline`` an ISO time at which long
    runs stop with their state saved (:mod:`grokkit.checkpoint`)."""

    stem: str
    source_text: str
    preset: str
    overrides: dict[str, Any]
    timeout: int | None          # per cell, in seconds; None: no limit
    cache: str | None = None
    workdir: str | None = None
    deadline: str | None = None  # $GROKKIT_DEADLINE for the kernel (grokkit.checkpoint); None: the worker's own
    record: bool = False         # describe the worker's machine and measure the kernel's CPU time (grokkit.records)


@dataclass
class Result:
    """What came back from executing a :class:`Task`: the executed (or partial) notebook as
    text, the notebook's summary, and the error if any."""

    stem: str
    notebook: str | None
    summary: dict[str, Any] | None
    error: str | None
    duration_s: float
    started_at: str
    host: str
    interrupted: bool = False
    grokkit_sha256: str | None = None    # the worker's grokkit code (cache.source_hash)
    machine: dict[str, Any] | None = None  # grokkit.records.machine(), for a recorded run
    cpu_s: float | None = None            # CPU seconds of the notebook's kernel, for a recorded run


_running = False  # whether this process is executing a task (SIGTERM then interrupts it)
_workdir: Path | None = None  # the working folder of the task this process is executing


def _interrupt_task(signum, frame) -> None:
    global _running
    if _running:  # once: the client repeats SIGTERM until the task returns
        _running = False
        raise KeyboardInterrupt


BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker_init(blas_threads: int | None = None) -> None:
    """For local worker processes: the client forwards interruptions as SIGTERM, which stops
    the running notebook (papermill shuts its kernel down); Ctrl-C is the client's alone.
    Every failure comes back in ``Result.error``, so the logs of papermill, nbclient and
    asyncio (which report a kernel shut down mid-cell as "Kernel died…") are silenced.

    ``blas_threads`` caps the threads of the BLAS and OpenMP pools of the notebooks' kernels
    (:data:`BLAS_THREAD_VARIABLES`, unless the user set them): with several notebooks at once,
    each pool sized to the whole machine would oversubscribe the cores, and small matrix
    products then run many times slower (a 100 × 100 pseudo-inverse measured 30 to 150 times
    slower with the default pools while other processes loaded the 2 cores of the development
    machine)."""
    if blas_threads is not None:
        for name in BLAS_THREAD_VARIABLES:
            os.environ.setdefault(name, str(blas_threads))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal: the client stops the run itself
    signal.signal(signal.SIGTERM, _interrupt_task)
    threading.Thread(target=_exit_with_client, args=(os.getppid(),), name="grokkit-client-watch",
                     daemon=True).start()
    for name in ("papermill", "nbclient", "asyncio", "traitlets"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def _exit_with_client(client: int) -> None:
    """A worker never outlives its client: once the client is gone (``kill -9``), remove the
    running task's working folder and exit; the notebook's kernel follows (ipykernel exits when
    its parent does)."""
    while os.getppid() == client:
        time.sleep(1.0)
    if _workdir is not None:
        shutil.rmtree(_workdir, ignore_errors=True)
    os._exit(1)


def execute(task: Task) -> Result:
    """Execute ``task`` with papermill in its working folder; never raises for a notebook's
    failure, which comes back in ``Result.error``."""
    global _running, _workdir
    workdir = Path(task.workdir or tempfile.mkdtemp(prefix=f"grokkit-{task.stem}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    _workdir = workdir
    (workdir / "pid").write_text(str(os.getpid()), encoding="utf-8")
    # The kernel's environment, restored once it ran (a run in this process leaves it as it was).
    found = {name: os.environ.get(name) for name in
             (SUMMARY_ENV, PROGRESS_ENV, cache.ENV, checkpoint.DEADLINE_ENV, checkpoint.PAGE_ENV)}
    # Names relative to the kernel's working folder: the same for every task of a worker.
    os.environ[SUMMARY_ENV], os.environ[PROGRESS_ENV] = SUMMARY_NAME, PROGRESS_NAME
    if task.cache is not None:
        if task.cache:
            os.environ[cache.ENV] = task.cache
        else:
            os.environ.pop(cache.ENV, None)
    if task.deadline is not None:
        os.environ[checkpoint.DEADLINE_ENV] = task.deadline
    os.environ[checkpoint.PAGE_ENV] = f"{task.stem}:{task.preset}"
    output = workdir / "executed.ipynb"
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    code = cache.source_hash()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, error, interrupted = time.perf_counter(), None, False
    _running = True
    try:
        papermill.execute_notebook(
            jupytext.reads(task.source_text, fmt="md:myst"), str(output),
            parameters=_injected(task), kernel_name="python3", cwd=str(workdir),
            progress_bar=False, execution_timeout=task.timeout, log_output=False,
            extra_arguments=KERNEL_ARGUMENTS)
    except papermill.PapermillExecutionError as err:
        error = f"cell {err.cell_index} (execution count {err.exec_count}) raised {err.ename}: {err.evalue}"
    except KeyboardInterrupt:
        error, interrupted = "interrupted", True
    except Exception as err:  # kernel death, cell timeout: report it, keep going with the others
        error = f"{type(err).__name__}: {err}"
    finally:
        _running = False
        _workdir = None
        for name, value in found.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    result = Result(task.stem, output.read_text(encoding="utf-8") if output.is_file() else None,
                    read_json(workdir / SUMMARY_NAME), error, time.perf_counter() - start,
                    started_at, socket.gethostname(), interrupted, grokkit_sha256=code)
    if task.record:
        from grokkit import records

        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result.cpu_s = round(after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime, 1)
        result.machine = records.machine()
    if task.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def _injected(task: Task) -> dict[str, Any]:
    """The parameters papermill injects: the preset, the overrides, and the names of those
    overridden with None (:data:`grokkit.report.NONE_OVERRIDES`), since a None in the parameters
    cell means the preset's value."""
    nones = [k for k, v in task.overrides.items() if v is None]
    return {"preset": task.preset, **{k: v for k, v in task.overrides.items() if v is not None},
            **({NONE_OVERRIDES: nones} if nones else {})}


def read_progress(workdir: Path) -> dict[str, Any] | None:
    """The kernel's latest progress record in ``workdir`` (:class:`grokkit.kernels.run.Progress`)."""
    return read_json(workdir / PROGRESS_NAME)


def running_pid(workdir: Path) -> int | None:
    """The process executing the task whose working folder is ``workdir``."""
    try:
        return int((workdir / "pid").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------- publishing


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


def relative(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it lies inside, else absolute."""
    path = path.resolve()
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it onto ``path``."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def tidy(nb: nbformat.NotebookNode, source: str, output: str) -> None:
    """Drop run-specific papermill/nbclient metadata (timings, absolute paths) so outputs do
    not churn, and hide the input of the injected-parameters cell."""
    meta = nb.metadata.get("papermill", {})
    for key in ("start_time", "end_time", "duration", "exception"):
        meta.pop(key, None)
    meta["input_path"], meta["output_path"] = source, output
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags and "hide-input" not in tags:
            cell.metadata["tags"] = [*tags, "hide-input"]


def banners(preset: str, overrides: dict[str, Any], cached: list[dict[str, Any]], stem: str,
            resumed: Sequence[dict[str, Any]] = ()) -> list[str]:
    """Notes at the top of a page: a run with overrides is not the preset's page, runs served by
    the result cache are named, and so are runs continued from a checkpoint (:mod:`grokkit.checkpoint`)."""
    notes = []
    if overrides:
        values = ", ".join(f"`{k}={v!r}`" for k, v in overrides.items())
        notes.append(f":::{{warning}}\nThis page was run with the {preset} preset and the overrides {values}: "
                     f"it is not the book's own page. `grokkit run {stem} --preset {preset}` restores it.\n:::")
    hits = [e["function"] for e in cached if e.get("hit")]
    if hits:
        notes.append(f":::{{note}}\n{len(hits)} of the {len(cached)} cached runs behind this page came from "
                     f"the result cache (`grokkit cache info`): {', '.join(hits)}.\n:::")
    if resumed:
        runs = ", ".join(f"{e['label']} (from step {e['resumed_at']:,} of {e['steps']:,})" for e in resumed)
        notes.append(f":::{{note}}\n{len(resumed)} run(s) behind this page continued from a checkpoint of an "
                     f"earlier, stopped run (`grokkit run --deadline`): {runs}. A continued run gives the numbers of "
                     f"an uninterrupted one, bit for bit.\n:::")
    return notes


def _add_banners(nb: nbformat.NotebookNode, notes: list[str]) -> None:
    """Insert ``notes`` after the first markdown cell (the title), once."""
    nb.cells = [c for c in nb.cells if BANNER_TAG not in c.metadata.get("tags", [])]
    at = next((i + 1 for i, c in enumerate(nb.cells) if c.cell_type == "markdown"), 0)
    nb.cells[at:at] = [nbformat.v4.new_markdown_cell(n, metadata={"tags": [BANNER_TAG]}) for n in notes]


@dataclass
class Outcome:
    """What one notebook's run came to: ``status`` is ran, skipped, failed, interrupted, or stopped (at the
    deadline, its runs checkpointed: the same command continues it)."""

    notebook: Notebook
    status: str
    message: str
    duration_s: float = 0.0


def publish(nb: Notebook, result: Result, root: Path, out: Path, preset: str,
            overrides: dict[str, Any], fp: dict[str, Any], revision: str) -> Outcome:
    """Write a successful run's page and summary (atomically, page first), or a failed run's
    evidence beside the page; an interrupted run writes nothing."""
    paths = page_paths(out, nb)
    error = result.error
    if error is None and result.summary is None:
        error = "the notebook did not call report.save()"
    run_info = {"preset": preset, "overrides": _canonical(overrides), "source": relative(nb.source, root),
                "duration_s": round(result.duration_s, 3), "git_revision": revision,
                "started_at": result.started_at, "host": result.host, "fingerprint": fp}
    if result.interrupted:
        return Outcome(nb, "interrupted", f"INTERRUPTED {nb.stem}: its page is unchanged", result.duration_s)
    if result.grokkit_sha256 is not None and result.grokkit_sha256 != fp.get("grokkit_sha256"):
        return Outcome(nb, "failed", f"FAILED {nb.stem}: the worker on {result.host} runs other grokkit code than "
                                     f"this checkout (source hash {result.grokkit_sha256}, here "
                                     f"{fp.get('grokkit_sha256')}): install this checkout's grokkit where the "
                                     f"notebooks run, then run again; nothing was published", result.duration_s)
    if error is not None and f"raised {checkpoint.DeadlineReached.__name__}:" in error:
        saved = error.split(f"raised {checkpoint.DeadlineReached.__name__}: ", 1)[1]
        return Outcome(nb, "stopped", f"STOPPED {nb.stem} at the deadline, its page unchanged: {saved}",
                       result.duration_s)
    if error is not None:
        where = "no partial notebook was written"
        # The evidence: the partial notebook, and a summary of the failure (with the claims when they
        # were saved before they failed), so that `grokkit status` shows it.
        evidence = {**(result.summary or {}), **run_info, "error": error}
        try:
            paths["page"].parent.mkdir(parents=True, exist_ok=True)
            if result.notebook is not None:
                partial = nbformat.reads(result.notebook, as_version=4)
                tidy(partial, run_info["source"], relative(paths["failed_page"], root))
                atomic_write(paths["failed_page"], nbformat.writes(partial))
                where = f"partial notebook: {paths['failed_page']}"
                evidence["executed"] = relative(paths["failed_page"], root)
            atomic_write(paths["failed_summary"], _json(evidence))
        except OSError as err:
            where = f"its evidence could not be written to {paths['page'].parent} ({err.strerror or err})"
        kept = " (the published page is unchanged)" if paths["page"].is_file() else ""
        return Outcome(nb, "failed", f"FAILED {nb.stem}: {error}\n  {where}{kept}", result.duration_s)

    page = nbformat.reads(result.notebook, as_version=4)
    tidy(page, run_info["source"], relative(paths["page"], root))
    _add_banners(page, banners(preset, overrides, result.summary.get("cache", []), nb.stem,
                               result.summary.get("checkpoints", [])))
    text = nbformat.writes(page) + "\n"
    data = {**result.summary, **run_info, "executed": relative(paths["page"], root), "page_sha256": _sha256(text.encode())}
    try:
        paths["page"].parent.mkdir(parents=True, exist_ok=True)  # a folder deleted during the run comes back
        atomic_write(paths["page"], text)
        atomic_write(paths["summary"], _json(data))
        for stale in (paths["failed_page"], paths["failed_summary"]):
            stale.unlink(missing_ok=True)
    except OSError as err:
        return Outcome(nb, "failed", f"FAILED {nb.stem}: its page could not be written to {paths['page'].parent} "
                                     f"({err.strerror or err}); {rescue(nb, text, _json(data))}", result.duration_s)
    claims = data.get("claims", [])
    passed = sum(bool(c.get("pass")) for c in claims)
    cached = sum(bool(e.get("hit")) for e in data.get("cache", []))
    line = (f"{nb.stem}  preset={preset}  {result.duration_s:.1f}s  claims {passed}/{len(claims)} passed"
            f"{f'  ({cached} cached runs)' if cached else ''}  {relative(paths['summary'], root)}")
    damaged = [f"{e.get('function')}: {e['recomputed']}" for e in data.get("cache", []) if e.get("recomputed")]
    if damaged:
        line += f"\n  {nb.stem}: recomputed {len(damaged)} result-cache entries that did not verify ({'; '.join(damaged)})"
    return Outcome(nb, "ran", line, result.duration_s)


def rescue(nb: Notebook, page: str, summary: str) -> str:
    """Keep an executed page and its summary that could not be published, in a new folder under
    the system's temporary folder; say where (or that nothing could be kept)."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"grokkit-rescued-{nb.stem}-"))
        (folder / f"{nb.stem}.ipynb").write_text(page, encoding="utf-8")
        (folder / f"{nb.stem}.json").write_text(summary, encoding="utf-8")
    except OSError as err:
        return f"the executed page could not be kept anywhere either ({err.strerror or err})"
    return (f"the executed page and its summary are kept in {folder} (copy both into "
            f"<out>/{nb.chapter}/ to publish them)")


def _json(data: dict[str, Any]) -> str:
    return json.dumps(_canonical(data), indent=2, allow_nan=False) + "\n"


def check_folder(folder: Path, what: str) -> None:
    """Refuse, before anything runs, a folder (``what``: its role) that is a file or cannot be written."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{what} {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise UsageError(f"cannot write to {what} {folder}: {err.strerror or err}") from None


def check_output_folder(out: Path, chapters: Sequence[str]) -> None:
    """Refuse, before anything runs, an output folder that is a file or cannot be written."""
    for folder in (out, *(out / c for c in chapters)):
        check_folder(folder, "output folder")


# ----------------------------------------------------------------------------- status and book


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


def generated_pages(root: Path, folder: Path | None = None) -> list[Path]:
    """The executed notebooks that ``_toc.yml`` lists under ``book/generated/``, looked up in
    ``folder`` (default: ``book/generated`` itself)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    prefix = GENERATED.as_posix() + "/"
    folder = folder or root / GENERATED
    return [(folder / entry[len(prefix):]).with_suffix(".ipynb")
            for entry in toc_files(toc) if entry.startswith(prefix)]


def page_status(out: Path, nb: Notebook) -> dict[str, Any]:
    """One page's state: ``state`` is up to date, stale (why), incomplete or missing, with
    its preset, overrides, claims and start time, and whether its last run failed."""
    paths = page_paths(out, nb)
    data = matching_summary(paths["page"], paths["summary"])
    failed = read_json(paths["failed_summary"])
    row: dict[str, Any] = {"stem": nb.stem, "preset": "-", "overrides": {}, "claims": "-", "ran": "-",
                           "failed": failed.get("started_at", "?") if failed else None,
                           "error": (str(failed.get("error", "")).splitlines() or [""])[0][:120] if failed else ""}
    if data is None:
        row["state"] = "incomplete (no matching summary)" if paths["page"].is_file() else "missing"
        return row
    claims = data.get("claims", [])
    row.update(preset=data.get("preset", "?"), overrides=data.get("overrides") or {},
               claims=f"{sum(bool(c.get('pass')) for c in claims)}/{len(claims)}", ran=data.get("started_at", "?"))
    changed = stale_reasons(nb, data)
    row["state"] = f"stale ({', '.join(changed)})" if changed else "up to date"
    return row


def page_problems(root: Path, folder: Path | None = None, *, missing_ok: bool = False) -> list[str]:
    """Why the book cannot be built from ``folder``: missing pages (unless ``missing_ok``), pages
    without a matching complete summary (an interrupted or hand-edited run), error outputs,
    papermill error cells, and paper-scale records that do not match their page
    (:func:`grokkit.records.problems`; never a record's verdict)."""
    from grokkit import records

    problems = []
    for page in generated_pages(root, folder):
        label = relative(page, root)
        try:
            record = records.read(root, page.parent.name, page.stem)
        except records.RecordError as err:
            problems.append(str(err))
        else:
            if record is not None:
                problems += records.problems(root, page.parent.name, page.stem, record)
        if not page.is_file():
            if not missing_ok:
                problems.append(f"{label} is missing: run `grokkit run all` first")
            continue
        if matching_summary(page, page.with_suffix(".json")) is None:
            problems.append(f"{label} has no matching complete summary (an interrupted or edited run): "
                            f"rerun `grokkit run {page.stem}`")
            continue
        nb = nbformat.read(page, as_version=4)
        for index, cell in enumerate(nb.cells):
            if ERROR_CELL_TAG in cell.metadata.get("tags", []):
                problems.append(f"{label}: cell {index} is a papermill error cell")
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    problems.append(f"{label}: cell {index} has an error output ({output.get('ename')})")
    return problems


def placeholder(title: str, stem: str, folder: Path) -> tuple[str, str]:
    """The page and summary that stand for a page missing from ``folder`` in ``grokkit book
    --from``: the page's title and how to run it. The scorecard leaves it out."""
    page = nbformat.v4.new_notebook()
    page.cells = [nbformat.v4.new_markdown_cell(
        f"# {title}\n\n:::{{note}}\nThis page is not in this build: {folder} holds no run of it. "
        f"`grokkit run {stem} --out {folder}` makes it.\n:::")]
    page.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    text = nbformat.writes(page) + "\n"
    return text, _json({"placeholder": True, "page_sha256": _sha256(text.encode())})


def page_warnings(root: Path, folder: Path | None = None) -> list[str]:
    """Pages that are not their preset's own (run with overrides, or at a preset other than
    quick), and pages that are stale: their notebook or grokkit changed since they ran."""
    notes = []
    sources = {(nb.chapter, nb.stem): nb for nb in discover(root)}
    for page in generated_pages(root, folder):
        data = read_json(page.with_suffix(".json")) or {}
        if data.get("overrides"):
            values = ", ".join(f"{k}={v!r}" for k, v in data["overrides"].items())
            notes.append(f"{page.stem} was run with overrides ({values}): it is not the {data.get('preset')} "
                         f"preset's page")
        elif data.get("preset", PRESETS[0]) != PRESETS[0]:
            notes.append(f"{page.stem} is at the {data['preset']} preset")
        nb = sources.get((page.parent.name, page.stem))
        if nb is not None and data:
            why = stale_reasons(nb, data)
            if why:
                notes.append(f"{page.stem} is stale ({', '.join(why)} since it ran): `grokkit run {page.stem}` "
                             f"updates it")
    return notes


def stale_reasons(nb: Notebook, data: dict[str, Any]) -> list[str]:
    """What changed since the page whose summary is ``data`` was made from ``nb``."""
    fp = data.get("fingerprint") or {}
    now = fingerprint(nb, data.get("preset", PRESETS[0]), data.get("overrides") or {})
    return [what for key, what in (("source_sha256", "notebook edited"), ("grokkit_sha256", "grokkit changed"))
            if fp.get(key) != now[key]]
