"""The ``grokkit`` command: list, run, status, book and cache (engine: :mod:`grokkit.pipeline`)."""
from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import nbformat

from grokkit import cache, checkpoint, pipeline, records
from grokkit.pipeline import Notebook, Outcome, Result, Task, UsageError
from grokkit.report import PRESETS

DEFAULT_CACHE = ".cache"  # under the repository root; git ignores it
EX_TEMPFAIL = 75  # sysexits.h: try again later (runs stopped at the deadline, checkpointed)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Runner:
    """Executes notebooks on ``workers`` local processes or on a Dask cluster, publishes each
    page as it finishes, prints a line per notebook and, every ``progress_every`` seconds,
    the progress of the notebooks still running."""

    def __init__(self, root: Path, out: Path, preset: str, overrides: dict[str, Any], *, timeout: int,
                 workers: int, force: bool, cache_dir: str, progress_every: float, scheduler: str | None = None,
                 deadline: float | None = None, record: bool = False):
        self.root, self.out, self.preset, self.overrides = root, out, preset, overrides
        self.deadline = deadline  # a UNIX time (grokkit.checkpoint), or None
        self.record = record      # keep each run as the page's paper-scale record (grokkit.records)
        self.timeout, self.workers, self.force, self.cache_dir = timeout, workers, force, cache_dir
        self.progress_every, self.scheduler = progress_every, scheduler
        self.stop = threading.Event()
        self.active: dict[str, tuple[float, Path | None]] = {}  # stem -> (start, local working folder)
        self.remote: dict[str, Any] = {}  # stem -> Dask future
        self.guard = threading.Lock()
        self.revision = pipeline.git_revision(root)  # the code that runs, even if the repository changes
        self.commit, self.dirty = records.commit(root), records.dirty_files(root)
        self.pool: ProcessPoolExecutor | None = None
        self.client = None

    # -- one notebook, in a client thread

    def one(self, nb: Notebook) -> Outcome:
        """:meth:`run_one`, where a failure of the output folder (deleted, unwritable) is this
        page's failure, never the run's: the other pages go on and the summary is printed."""
        try:
            return self.run_one(nb)
        except OSError as err:
            return Outcome(nb, "failed", f"FAILED {nb.stem}: its output folder {self.out / nb.chapter} cannot be "
                                         f"used ({err.strerror or err})")

    def run_one(self, nb: Notebook) -> Outcome:
        """Lock the page, skip it if up to date, else execute it and publish the result."""
        from filelock import FileLock, Timeout

        lock_path = pipeline.page_paths(self.out, nb)["lock"]
        lock_path.parent.mkdir(parents=True, exist_ok=True)  # a folder deleted during the run comes back
        lock, announced = FileLock(lock_path), False
        while True:
            if self.stop.is_set():
                return Outcome(nb, "interrupted", f"INTERRUPTED {nb.stem}: not started")
            try:
                lock.acquire(timeout=1)
                break
            except Timeout:
                if not announced:
                    print(f"{nb.stem}: another grokkit run is writing this page; waiting for it", flush=True)
                    announced = True
        try:
            fp = pipeline.fingerprint(nb, self.preset, self.overrides)
            if self.record and not self.force and self.record_is_current(nb):
                return Outcome(nb, "skipped", f"{nb.stem}  its record is current, skipped (--force reruns it)")
            if not self.record and not self.force and pipeline.up_to_date(self.out, nb, self.preset, self.overrides):
                return Outcome(nb, "skipped", f"{nb.stem}  up to date, skipped (--force reruns it)")
            if self.deadline is not None and time.time() >= self.deadline:
                return Outcome(nb, "stopped", f"STOPPED {nb.stem}: not started, the deadline has passed")
            when = None if self.deadline is None else datetime.fromtimestamp(self.deadline, timezone.utc).isoformat()
            task = Task(nb.stem, nb.source.read_text(encoding="utf-8"), self.preset, self.overrides,
                        self.timeout, cache=self.cache_dir, deadline=when, record=self.record)
            result = self.submit_remote(task) if self.client is not None else self.submit_local(task)
            if self.stop.is_set() and result.error is not None:
                result.interrupted = True
            before = pipeline.read_json(pipeline.page_paths(self.out, nb)["summary"]) or {}
            outcome = pipeline.publish(nb, result, self.root, self.out, self.preset, self.overrides, fp,
                                       self.revision)
            if self.record:
                return self.keep_record(nb, result, outcome)
            if outcome.status == "ran":
                outcome.message += self.preset_note(nb, before.get("preset"))
            return outcome
        finally:
            lock.release()

    def record_is_current(self, nb: Notebook) -> bool:
        try:
            data = records.read(self.root, nb.chapter, nb.stem)
        except records.RecordError:
            return False
        return (data is not None and not records.problems(self.root, nb.chapter, nb.stem, data)
                and not records.stale(self.root, data))

    def keep_record(self, nb: Notebook, result: pipeline.Result, outcome: Outcome) -> Outcome:
        """Write the paper-scale record of a run that finished, its claims passed or not (a failed
        claim at the paper's scale is a finding); a run that stopped, or failed otherwise, leaves
        the page's record as it was."""
        claims_failed = result.error is not None and "raised AssertionError: claims failed" in result.error
        if outcome.status not in ("ran", "failed") or (outcome.status == "failed" and not claims_failed) \
                or result.summary is None or result.notebook is None:
            return outcome
        page = nbformat.reads(result.notebook, as_version=4)
        pipeline.tidy(page, pipeline.relative(nb.source, self.root), f"{records.RECORDS}/{nb.chapter}/{nb.stem}.ipynb")
        cached = [e for e in result.summary.get("cache", []) if e.get("hit")]
        provenance = {
            "commit": self.commit, "dirty_files": self.dirty, "started_at": result.started_at,
            "wall_s": round(result.duration_s, 1), "kernel_cpu_s": result.cpu_s, "machine": result.machine,
            "grokkit_sha256": result.grokkit_sha256, "requirements_lock_sha256": records.lock_sha256(self.root),
            "cached_runs": f"{len(cached)} of {len(result.summary.get('cache', []))}",
            "resumed_from_checkpoints": result.summary.get("checkpoints", []),
        }
        path = records.write(self.root, nb.chapter, nb.stem, nb.source, nbformat.writes(page),
                             {**result.summary, "preset": self.preset}, provenance)
        v = records.verdict(records.read(self.root, nb.chapter, nb.stem))
        failed = (f"; {v['total'] - v['passed']} failed: findings at the paper's scale, shown on the page"
                  if v["passed"] < v["total"] else "")
        return Outcome(nb, "ran", f"RECORDED {nb.stem} at the {self.preset} preset in "
                                  f"{_duration(result.duration_s)}: {v['passed']}/{v['total']} of the paper's claims "
                                  f"pass{failed}; {pipeline.relative(path, self.root)}", result.duration_s)

    def preset_note(self, nb: Notebook, before: str | None) -> str:
        """What a run at another preset did to the book's page: the book's pages are the quick
        preset's, and `make book` (``grokkit run all``) puts a quick page back over a paper one."""
        if self.out != self.root / pipeline.GENERATED:
            return ""
        if self.preset != PRESETS[0]:
            return (f"\n  note: {nb.stem}'s page in the book is now at the {self.preset} preset; `make book` and "
                    f"`grokkit run all` run the {PRESETS[0]} preset and put the {PRESETS[0]} page back (keep "
                    f"{self.preset}-preset runs outside the book with --out DIR)")
        if before is not None and before != self.preset:
            return (f"\n  note: {nb.stem}'s page in the book was at the {before} preset; the {self.preset} "
                    f"page replaced it (keep runs of other presets outside the book with --out DIR)")
        return ""

    def submit_local(self, task: Task) -> Result:
        workdir = Path(tempfile.mkdtemp(prefix=f"grokkit-{task.stem}-"))
        with self.guard:
            self.active[task.stem] = (time.monotonic(), workdir)
        try:
            return self.pool.submit(pipeline.execute, Task(**{**task.__dict__, "workdir": str(workdir)})).result()
        except BrokenProcessPool as err:
            return self._lost(task, f"the worker process died ({err})")
        finally:
            with self.guard:
                del self.active[task.stem]
            shutil.rmtree(workdir, ignore_errors=True)

    def submit_remote(self, task: Task) -> Result:
        from distributed import KilledWorker

        # Dask workers keep their own $GROKKIT_CACHE: the client's folder may not exist there.
        future = self.client.submit(pipeline.execute, Task(**{**task.__dict__, "cache": None}), pure=False,
                                    key=f"grokkit-{task.stem}-{os.getpid()}-{time.time_ns()}")
        with self.guard:
            self.active[task.stem], self.remote[task.stem] = (time.monotonic(), None), future
        try:
            return future.result()
        except KilledWorker as err:
            return self._lost(task, f"the Dask workers running it died, {err.args[0] if err.args else ''} "
                                    "(KilledWorker: the scheduler retried it and gave up)")
        except CancelledError:
            return self._lost(task, "interrupted", interrupted=True)
        except Exception as err:  # a lost connection to the scheduler, say
            return self._lost(task, f"{type(err).__name__} from the Dask cluster: {err}")
        finally:
            with self.guard:
                del self.active[task.stem], self.remote[task.stem]

    @staticmethod
    def _lost(task: Task, error: str, interrupted: bool = False) -> Result:
        return Result(task.stem, None, None, error, 0.0, "", "", interrupted)

    # -- all notebooks

    def progress_lines(self) -> list[str]:
        """One line per notebook running for longer than ``progress_every``."""
        now, lines = time.monotonic(), []
        with self.guard:
            active = dict(self.active)
        for stem, (start, workdir) in sorted(active.items()):
            if now - start < self.progress_every:
                continue
            line = f"  ... {stem}: running for {_duration(now - start)}"
            record = pipeline.read_progress(workdir) if workdir is not None else None
            if record and record.get("total"):
                line += (f"; {record['label']} {record['done'] / record['total']:.0%} "
                         f"({record['done']:.3g} of {record['total']:.3g} steps)")
            lines.append(line)
        return lines

    def run(self, notebooks: list[Notebook]) -> tuple[list[Outcome], KeyboardInterrupt | None]:
        """Run ``notebooks``; return the outcomes and the interruption (Ctrl-C, SIGTERM) if any."""
        if self.scheduler:
            self.client = _connect(self.scheduler)
        else:
            self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=pipeline.worker_init,
                                            initargs=(max(1, (os.cpu_count() or 1) // self.workers),))
        threads = ThreadPoolExecutor(self.workers, thread_name_prefix="grokkit-run")
        pending: set[Future] = {threads.submit(self.one, nb) for nb in notebooks}
        outcomes: list[Outcome] = []
        interrupted = None
        last = time.monotonic()
        try:
            while pending:
                done, pending = wait(pending, timeout=min(self.progress_every, 5.0), return_when=FIRST_COMPLETED)
                for future in done:
                    outcomes.append(self._report(future.result()))
                if time.monotonic() - last >= self.progress_every:
                    last = time.monotonic()
                    for line in self.progress_lines():
                        print(line, flush=True)
        except KeyboardInterrupt as err:
            interrupted = err
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # cleaning up: a second Ctrl-C must not cut it short
            self.stop.set()
            while pending:  # repeated: a worker may not have been running its task at the first signal
                self._interrupt_running()
                done, pending = wait(pending, timeout=1.0)
                for future in done:
                    outcomes.append(self._report(future.result(), quiet=True))
        finally:
            threads.shutdown(wait=True)
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
            if self.client is not None:
                self.client.close()
        return outcomes, interrupted

    def _interrupt_running(self) -> None:
        with self.guard:
            workdirs = [w for _, w in self.active.values() if w is not None]
            futures = list(self.remote.values())
        for workdir in workdirs:
            pid = pipeline.running_pid(workdir)
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if futures:
            self.client.cancel(futures)

    def _report(self, outcome: Outcome, quiet: bool = False) -> Outcome:
        if not quiet:
            print(outcome.message, flush=True)
        if outcome.status == "ran" and self.preset == "quick" and outcome.duration_s > pipeline.QUICK_BUDGET_S:
            print(f"warning: {outcome.notebook.stem} took {outcome.duration_s:.0f} s at the quick preset, over "
                  f"its {pipeline.QUICK_BUDGET_S} s budget (CONTRIBUTING.md)", file=sys.stderr, flush=True)
        return outcome


def _connect(address: str):
    from distributed import Client

    try:
        return Client(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {err}") from None


# ----------------------------------------------------------------------------- commands


def _out(args: argparse.Namespace, root: Path) -> Path:
    return Path(args.out).resolve() if getattr(args, "out", None) else root / pipeline.GENERATED


def _cache_folder(args: argparse.Namespace, root: Path) -> Path:
    return Path(args.cache or os.environ.get(cache.ENV) or root / DEFAULT_CACHE).expanduser().resolve()


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled as an interruption."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _terminate(signum, frame) -> None:
    raise _Terminated(signum)


def run(args: argparse.Namespace) -> int:
    """``grokkit run``: check everything, then execute the selected notebooks."""
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be an integer >= 1, got {args.workers}")
    if args.progress_every <= 0:
        raise UsageError(f"--progress-every must be a positive number of seconds, got {args.progress_every}")
    root = pipeline.find_root()
    notebooks = pipeline.resolve_targets(args.targets, pipeline.discover(root))
    overrides = pipeline.parse_overrides(args.param)
    pipeline.check_overrides(notebooks, args.preset, overrides)
    cache_dir = "" if args.no_cache else str(_cache_folder(args, root))
    if cache_dir:
        pipeline.check_folder(Path(cache_dir), "the result cache folder")
    # A recorded run keeps its executed page out of the book, whose pages are the quick preset's.
    out = _out(args, root) if args.out or not args.record else root / DEFAULT_CACHE / "paper-pages"
    pipeline.check_output_folder(out, sorted({nb.chapter for nb in notebooks}))
    # A recorded run checkpoints into the repository (records.CHECKPOINTS), for as long as it runs.
    into_repository = args.record and not os.environ.get(checkpoint.ENV, "").strip()
    if into_repository:
        os.environ[checkpoint.ENV] = str(root / records.CHECKPOINTS)
    try:
        return _run(args, root, notebooks, overrides, cache_dir, out)
    finally:
        if into_repository:
            os.environ.pop(checkpoint.ENV, None)


def _run(args: argparse.Namespace, root: Path, notebooks: list[Any], overrides: dict[str, Any], cache_dir: str,
         out: Path) -> int:
    """``grokkit run`` once its pages, parameters and folders are checked."""
    workers = args.workers or max(1, min(os.cpu_count() or 1, len(notebooks)))
    # A paper preset runs for hours in one cell: only the quick preset gets a default per-cell limit.
    timeout = args.timeout if args.timeout is not None else (
        pipeline.DEFAULT_TIMEOUT if args.preset == PRESETS[0] else None)
    deadline = None
    if args.deadline is not None:
        try:
            deadline = checkpoint.absolute(args.deadline, "--deadline")
        except ValueError as err:
            raise UsageError(str(err)) from None
        if not cache_dir and not os.environ.get(checkpoint.ENV, "").strip():
            raise UsageError(f"--deadline keeps the state of the runs it stops in the checkpoint folder, "
                             f"$GROKKIT_CACHE/checkpoints: drop --no-cache, or set ${checkpoint.ENV}")
    if args.record:
        check_record(root, args, overrides)
    runner = Runner(root, out, args.preset, overrides, timeout=timeout, workers=workers, force=args.force,
                    cache_dir=cache_dir, progress_every=args.progress_every, scheduler=args.scheduler,
                    deadline=deadline, record=args.record)
    start = time.perf_counter()
    # Ctrl-C and SIGTERM interrupt the run, even where SIGINT came ignored from the parent (a
    # process started with SIGINT ignored gets no KeyboardInterrupt from Python); the handlers in
    # place before are restored after it, also the SIGINT that the clean-up ignores.
    # A closed terminal (SIGHUP) stops the run as SIGTERM does: cleanly, its temporary folders removed.
    previous = (signal.signal(signal.SIGTERM, _terminate), signal.signal(signal.SIGINT, signal.default_int_handler),
                signal.signal(signal.SIGHUP, _terminate))
    try:
        outcomes, interrupted = runner.run(notebooks)
    except KeyboardInterrupt as err:  # before the runner took over
        outcomes, interrupted = [], err
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
        signal.signal(signal.SIGHUP, previous[2])
    by = {status: [o.notebook.stem for o in outcomes if o.status == status]
          for status in ("ran", "skipped", "failed", "interrupted", "stopped")}
    if interrupted:
        finished = by["ran"] + by["skipped"]
        print(f"grokkit: interrupted; finished: {', '.join(finished) or 'none'}; interrupted or not started: "
              f"{', '.join(by['interrupted']) or 'none'} (their pages are unchanged); run the same command again "
              f"to finish the rest (finished pages are skipped)", file=sys.stderr, flush=True)
        return 128 + (interrupted.signum if isinstance(interrupted, _Terminated) else signal.SIGINT)
    stopped = f", {len(by['stopped'])} stopped at the deadline" if by["stopped"] else ""
    print(f"{len(notebooks)} notebook(s) in {time.perf_counter() - start:.1f}s: {len(by['ran'])} ran, "
          f"{len(by['skipped'])} up to date, {len(by['failed'])} failed{stopped}", flush=True)
    if by["failed"]:
        print(f"{len(by['failed'])} of {len(notebooks)} notebooks failed: {', '.join(by['failed'])}", file=sys.stderr)
        return 1
    if by["stopped"]:
        print(f"stopped at the deadline: {', '.join(by['stopped'])}; their runs are checkpointed: run the same "
              f"command again to continue them", file=sys.stderr)
        return EX_TEMPFAIL
    return 0


def check_record(root: Path, args: argparse.Namespace, overrides: dict[str, Any]) -> None:
    """Refuse, before anything runs, a record that would not be the paper's own run of this code."""
    if args.preset != "paper":
        raise UsageError(f"--record keeps paper-scale records: it needs --preset paper, got --preset {args.preset}")
    if overrides:
        raise UsageError(f"--record keeps the paper preset's own run: drop the overrides "
                         f"({', '.join(f'-p {k}' for k in overrides)})")
    dirty = records.dirty_files(root)
    if dirty and not args.allow_dirty:
        shown = ", ".join(dirty[:8]) + (f" and {len(dirty) - 8} more" if len(dirty) > 8 else "")
        raise UsageError(f"--record stamps its records with the commit, and the checkout has uncommitted changes "
                         f"({shown}): commit them, or pass --allow-dirty (the record then lists these files)")


def status(args: argparse.Namespace) -> int:
    """``grokkit status``: one line per page."""
    root = pipeline.find_root()
    notebooks = pipeline.resolve_targets(args.targets or ["all"], pipeline.discover(root))
    out = _out(args, root)
    rows = [pipeline.page_status(out, nb) for nb in notebooks]
    width = max((len(r["stem"]) for r in rows), default=0)
    for r in rows:
        overrides = ", ".join(f"{k}={v!r}" for k, v in r["overrides"].items()) or "-"
        failed = f"  last run FAILED at {r['failed']}: {r['error']}" if r["failed"] else ""
        print(f"{r['stem']:<{width}}  {r['state']:<12}  preset={r['preset']:<6}  overrides={overrides}  "
              f"claims={r['claims']}  ran={r['ran']}{failed}")
    return 0


def list_notebooks(args: argparse.Namespace) -> int:
    """``grokkit list``: chapter, stem and title of every notebook; ``--params`` adds parameters."""
    root = pipeline.find_root()
    notebooks = pipeline.discover(root)
    if args.params:
        for nb in pipeline.resolve_targets([args.params], notebooks):
            params = pipeline.read_parameters(nb)
            presets = sorted(params.presets, key=lambda p: (p not in PRESETS, PRESETS.index(p) if p in PRESETS else 0))
            rows = [("parameter", *presets, "comment")]
            rows += [(name, *(repr(params.presets[p].get(name, "-")) for p in presets), comment)
                     for name, comment in params.names.items() if name != "preset"]
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
            print(f"{nb.stem}: {pipeline.title_of(nb.source)}")
            for r in rows:
                print(("  " + "  ".join(f"{c:<{w}}" for c, w in zip(r, widths)) + f"  {r[-1]}").rstrip())
        return 0
    width = max((len(nb.stem) for nb in notebooks), default=0)
    for nb in notebooks:
        print(f"{nb.chapter}  {nb.stem:<{width}}  {pipeline.title_of(nb.source)}")
    return 0


def book(args: argparse.Namespace) -> int:
    """``grokkit book``: check the executed notebooks, then build the HTML."""
    root = pipeline.find_root()
    folder = Path(args.from_).resolve() if args.from_ else None
    if folder is not None and not folder.is_dir():
        raise UsageError(f"--from must be a folder of executed notebooks, got {folder}")
    # From another folder, the book is built from the pages it holds; the others are placeholders.
    missing = [] if folder is None else [p for p in pipeline.generated_pages(root, folder) if not p.is_file()]
    problems = pipeline.page_problems(root, folder, missing_ok=folder is not None)
    if problems:
        print("cannot build the book:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    if missing:
        print(f"warning: {len(missing)} of the book's {len(pipeline.generated_pages(root))} pages are not in {folder} "
              f"and are built as placeholders: {', '.join(p.stem for p in missing)}", file=sys.stderr)
    for note in pipeline.page_warnings(root, folder):
        print(f"warning: {note}", file=sys.stderr)
    out = Path(args.out).resolve() if args.out else root
    html = out / "_build" / "html"
    # Every page is rebuilt (--all), beside the last book: only a finished build replaces it, so an
    # interrupted or failed one leaves the last good book in place. A fresh folder also drops the
    # pages of documents that no longer exist, which Sphinx would leave behind.
    for leftover in (out / "_build").glob(".grokkit-book-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    building = out / "_build" / f".grokkit-book-{os.getpid()}"
    code, failed = 1, False
    try:
        with tempfile.TemporaryDirectory(prefix="grokkit-book-") as scratch:
            source = root if folder is None else _book_with_pages(root, folder, Path(scratch), missing)
            script = Path(sys.executable).parent / "jupyter-book"
            command = [str(script)] if script.is_file() else [
                sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]
            command += ["build", str(source), "--path-output", str(building), "--all", "-W", "-n", "--keep-going"]
            code = subprocess.run(command, check=False).returncode
        failed = code != 0
        built = building / "_build" / "html"
        if code == 0 and built.is_dir():
            old = out / "_build" / f".html-old-{os.getpid()}"
            if html.exists():
                os.replace(html, old)
            os.replace(built, html)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if not failed:  # a failed build stays for inspection; an interrupted one goes
            shutil.rmtree(building, ignore_errors=True)
    if code == 0:
        print(f"Book: {html / 'index.html'}")
    else:
        last = f"the last good book is unchanged ({html / 'index.html'})" if html.is_dir() else "there is no book yet"
        print(f"grokkit: the book build failed (exit code {code}): {last}; the failed build is in "
              f"{building / '_build' / 'html'}", file=sys.stderr)
    return code


def _book_with_pages(root: Path, folder: Path, scratch: Path, missing: Sequence[Path]) -> Path:
    """A copy of the book's sources (links) whose ``book/generated`` holds the pages of ``folder``,
    and a placeholder for each page in ``missing`` (:func:`grokkit.pipeline.placeholder`)."""
    for name in ("_config.yml", "_toc.yml", "notebooks"):  # notebooks/: each page offers its source
        (scratch / name).symlink_to(root / name)
    (scratch / "book").mkdir()
    for entry in (root / "book").iterdir():
        if entry.name != pipeline.GENERATED.name:
            (scratch / "book" / entry.name).symlink_to(entry)
    generated = scratch / pipeline.GENERATED
    sources = {(nb.chapter, nb.stem): nb for nb in pipeline.discover(root)}
    for page in pipeline.generated_pages(root, folder):
        target = generated / page.parent.name / page.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if page in missing:
            nb = sources.get((page.parent.name, page.stem))
            title = pipeline.title_of(nb.source) if nb is not None else page.stem
            text, summary = pipeline.placeholder(title, page.stem, folder)
            target.write_text(text, encoding="utf-8")
            target.with_suffix(".json").write_text(summary, encoding="utf-8")
        else:
            target.symlink_to(page)
            target.with_suffix(".json").symlink_to(page.with_suffix(".json"))
    return scratch


def cache_command(args: argparse.Namespace) -> int:
    """``grokkit cache info|clear``."""
    folder = _cache_folder(args, pipeline.find_root())
    unfinished = checkpoint.listing(folder / "checkpoints")
    if args.action == "clear":
        print(f"removed {cache.clear(folder)} entries from {folder}")
        if unfinished:
            print(f"kept the checkpoints of {len(unfinished)} unfinished runs in {folder / 'checkpoints'} (delete "
                  "that folder to start those runs over)")
        return 0
    if not folder.is_dir():
        print(f"{folder}: no cache yet")
        return 0
    info = cache.info(folder)
    print(f"{info['folder']}: {info['entries']} entries, {info['bytes'] / 1e6:.1f} MB")
    for name, count in sorted(info["by_function"].items()):
        print(f"  {name}: {count}")
    if unfinished:
        print(f"checkpoints of unfinished runs (grokkit run continues them), in {folder / 'checkpoints'}:")
        for row in unfinished:
            print(f"  {checkpoint.summary_line(row)}")
    return 0


# ----------------------------------------------------------------------------- CLI

EPILOG = """\
examples:
  grokkit list                              the notebooks
  grokkit list --params fig02               a notebook's parameters under each preset
  grokkit run all                           every page, quick preset, in parallel; up-to-date pages are skipped
  grokkit run fig01 --preset paper          one page at the paper's scale
  grokkit run fig02 -p seed=3 --out runs/   an override, written outside the book
  grokkit run fig33 --preset paper --deadline 2h   stop cleanly after 2 hours; the same command continues
  grokkit run fig14 --preset paper --record keep the run as the page's record in book/paper_runs/ (the book shows it)
  grokkit run all --scheduler tcp://HOST:8786   on a running Dask cluster
  grokkit status                            each page: preset, overrides, claims, up to date or not
  grokkit book                              check the pages and build the HTML
"""


def parser() -> argparse.ArgumentParser:
    """The ``grokkit`` command-line interface."""
    cli = argparse.ArgumentParser(prog="grokkit", description="Regenerate and build the grokkit book.",
                                  epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = cli.add_subparsers(dest="command", required=True)

    list_cli = commands.add_parser("list", help="list the notebooks")
    list_cli.add_argument("--params", metavar="NOTEBOOK", help="print this notebook's parameters and presets")
    list_cli.set_defaults(func=list_notebooks)

    run_cli = commands.add_parser("run", help="execute notebooks into book/generated/")
    run_cli.add_argument("targets", nargs="+", metavar="TARGET",
                         help="all, a chapter, a notebook stem, a unique stem prefix, or a path to a .md")
    run_cli.add_argument("--preset", choices=PRESETS, default=PRESETS[0], help="parameter preset (default: %(default)s)")
    run_cli.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                         help="override a parameter; VALUE is a Python literal or a string")
    run_cli.add_argument("--out", help="output folder (default: book/generated under the repository)")
    run_cli.add_argument("--force", action="store_true", help="rerun pages that are up to date")
    run_cli.add_argument("--workers", type=int, help="notebooks run at once (default: the cores, at most the notebooks)")
    run_cli.add_argument("--scheduler", metavar="ADDRESS", help="run on this Dask scheduler (tcp://host:port)")
    run_cli.add_argument("--cache", metavar="DIR", help=f"result cache (default: $GROKKIT_CACHE, else {DEFAULT_CACHE}/ "
                                                        "in the repository)")
    run_cli.add_argument("--no-cache", action="store_true", help="recompute every run")
    run_cli.add_argument("--deadline", metavar="WHEN",
                         help="stop long runs cleanly at this time, their state checkpointed, and start no notebook "
                              "after it: a duration from now (45m, 2h, 1h30m) or a time (2026-11-27T21:00); the same "
                              "command continues them (exit status 75 when some stopped)")
    run_cli.add_argument("--record", action="store_true",
                         help="keep each run as its page's paper-scale record in book/paper_runs/<chapter>/ (with "
                              "--preset paper, no overrides; a page whose record is current is skipped)")
    run_cli.add_argument("--allow-dirty", action="store_true",
                         help="with --record: record from a checkout with uncommitted changes (listed in the record)")
    run_cli.add_argument("--timeout", type=int, default=None,
                         help=f"per-cell timeout in seconds (default: {pipeline.DEFAULT_TIMEOUT} at the quick "
                              "preset, none at the paper preset)")
    run_cli.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS",
                         help="report long notebooks' progress this often (default: %(default)s)")
    run_cli.set_defaults(func=run)

    status_cli = commands.add_parser("status", help="one line per page: preset, overrides, claims, up to date")
    status_cli.add_argument("targets", nargs="*", metavar="TARGET", help="as for run (default: all)")
    status_cli.add_argument("--out", help="output folder (default: book/generated)")
    status_cli.set_defaults(func=status)

    book_cli = commands.add_parser("book", help="check the executed notebooks and build the HTML")
    book_cli.add_argument("--from", dest="from_", metavar="DIR", help="executed notebooks written elsewhere (--out)")
    book_cli.add_argument("--out", help="folder that receives _build/ (default: the repository)")
    book_cli.set_defaults(func=book)

    cache_cli = commands.add_parser("cache", help="the result cache: info or clear")
    cache_cli.add_argument("action", choices=("info", "clear"))
    cache_cli.add_argument("--cache", metavar="DIR", help="cache folder (default as for run)")
    cache_cli.set_defaults(func=cache_command)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``grokkit`` console script; returns the exit code."""
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"grokkit: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("grokkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
