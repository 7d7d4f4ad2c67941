r"""Checkpoints of long runs: the loop of :mod:`grokkit.kernels.run` saves its whole state at a
record boundary and resumes from it, so that a paper preset of several hours survives being
stopped.

Where. A run is checkpointed when it has a folder, ``$GROKKIT_CHECKPOINTS``, else
``$GROKKIT_CACHE/checkpoints`` (``grokkit run`` always sets the cache unless ``--no-cache``), and
when it is the computation of a cached call (:func:`grokkit.cache.cached`: every kernel, every
training). The call names its checkpoint: its function and a hash of its arguments, plus the rank
of the run within the call (a call may run several loops). A checkpoint is written beside its
place and renamed into it (atomic), with the SHA-256 of its content; the finished run deletes it.

When. Every :data:`EVERY_ENV` seconds of a run (600 by default: shorter runs never write one),
and when the deadline ``$GROKKIT_DEADLINE`` has passed: the run then saves its state and raises
:class:`DeadlineReached`, which says where the state is; the same call continues it
(``grokkit run --deadline 2h`` sets the deadline of every notebook it runs, and the same command
continues them). The deadline is checked at record boundaries: the run stops at the first one
after it (the records of a long run are about 2 % of its steps apart).

Which code. A checkpoint holds the state of one computation, and resuming it with other code
would splice two computations. It records a fingerprint of the code the run depends on
(:func:`code_fingerprint`: the source of the cached function, of the step, of the family's
functions and of the loop, and of everything of grokkit they call, with the C source of the
fused steps where they run), not of the whole package: an edit elsewhere in grokkit leaves it
valid. A checkpoint whose code changed is refused (:class:`CheckpointError`, naming the functions
that changed); a damaged one (truncated, overwritten) is set aside with a warning, and the run
starts over.
"""
from __future__ import annotations

import ast
import contextvars
import dataclasses
import functools
import hashlib
import inspect
import os
import pickle
import re
import sys
import textwrap
import time
import types
import warnings
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ENV = "GROKKIT_CHECKPOINTS"
DEADLINE_ENV = "GROKKIT_DEADLINE"
EVERY_ENV = "GROKKIT_CHECKPOINT_EVERY"
EVERY_S = 600.0
# The page and preset whose run a checkpoint belongs to ("fig33-...:paper"), set by `grokkit run`
# for its kernels: the book says how far a paper-preset run in progress has come.
PAGE_ENV = "GROKKIT_PAGE"
FORMAT = 1  # the layout of a saved state: raise it when the loop saves other things
SUFFIX = ".ckpt"
_STARTED = time.time()  # a deadline given as a duration counts from the start of the process


_events: list[dict[str, Any]] = []


def events() -> list[dict[str, Any]]:
    """The runs of this process continued from a checkpoint: ``label``, ``resumed_at`` (a step), ``steps``."""
    return [dict(e) for e in _events]


class DeadlineReached(Exception):
    """A run stopped at the deadline (``$GROKKIT_DEADLINE``) with its state saved: the same call continues it."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed: written by other code, or by another computation."""


def _now() -> float:
    """The wall clock of deadlines and checkpoint intervals (the tests replace it)."""
    return time.time()


# ----------------------------------------------------------------------------- settings

_DURATION = re.compile(r"(?:(\d+(?:\.\d*)?)h)?(?:(\d+(?:\.\d*)?)m)?(?:(\d+(?:\.\d*)?)s?)?")


def duration(text: str, name: str = "deadline") -> float:
    """Seconds in ``text``: ``"90"``, ``"90s"``, ``"45m"``, ``"2h"``, ``"1h30m"``; ``name`` names
    it in the error for anything else."""
    match = _DURATION.fullmatch(str(text).strip().lower())
    if not str(text).strip() or match is None or not any(match.groups()):
        raise ValueError(f"{name} must be a duration such as 90s, 45m, 2h or 1h30m, or a time such as "
                         f"2026-11-27T21:00, got {text!r}")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return 3600 * h + 60 * m + s


def absolute(text: str, name: str = "deadline", start: float | None = None) -> float:
    """The UNIX time of a deadline ``text``: an ISO 8601 time (local time unless it names its zone)
    or a duration (:func:`duration`) counted from ``start`` (default: now)."""
    value = str(text).strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ].*", value):
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            raise ValueError(f"{name} must be a duration such as 45m or 2h, or a time such as 2026-11-27T21:00, "
                             f"got {text!r}") from None
    return (_now() if start is None else start) + duration(value, name)


def deadline() -> float | None:
    """The deadline of this process, as a UNIX time: ``$GROKKIT_DEADLINE`` (:func:`absolute`; a
    duration counts from the start of the process), or None."""
    value = os.environ.get(DEADLINE_ENV, "").strip()
    return absolute(value, f"${DEADLINE_ENV}", _STARTED) if value else None


def every() -> float:
    """Seconds between two checkpoints of a run: ``$GROKKIT_CHECKPOINT_EVERY`` (> 0), default 600."""
    value = os.environ.get(EVERY_ENV, "").strip()
    if not value:
        return EVERY_S
    seconds = duration(value, f"${EVERY_ENV}")
    if seconds <= 0:
        raise ValueError(f"${EVERY_ENV} must be a positive duration, got {value!r}")
    return seconds


def folder() -> Path | None:
    """The checkpoint folder: ``$GROKKIT_CHECKPOINTS``, else ``$GROKKIT_CACHE/checkpoints``, else None (off)."""
    for name, sub in ((ENV, ""), ("GROKKIT_CACHE", "checkpoints")):
        value = os.environ.get(name, "").strip()
        if value:
            return Path(value).expanduser().resolve() / sub
    return None


# ----------------------------------------------------------------------------- the code a run depends on

def _ours(obj: Any, package: str) -> bool:
    """Whether ``obj`` is of ``package``, this module aside: saving and loading are not the computation
    (:data:`FORMAT` versions what is saved)."""
    module = getattr(obj, "__module__", None) or ""
    return (module == package or module.startswith(package + ".")) and module != __name__


def generated(obj: Any) -> bool:
    """Whether a function was written by code rather than in a file (the ``__init__``, ``__eq__`` and
    ``__repr__`` that :mod:`dataclasses` generates): its class's source already says what it does."""
    while obj is not None and getattr(obj, "__wrapped__", None) is not None:  # the recursion guard of __repr__
        obj = obj.__wrapped__
    return getattr(getattr(obj, "__code__", None), "co_filename", "").startswith("<")


def _names(code: types.CodeType) -> set[str]:
    """The global and attribute names a code object and the functions nested in it use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _source(obj: Any) -> str:
    """What a function or class computes: its source parsed, without docstrings and comments, so
    that editing the documentation leaves checkpoints resumable and records current."""
    try:
        text = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):  # no file (an interactive definition): its compiled code
        code = getattr(obj, "__code__", None)
        return repr(code.co_code) + repr(code.co_consts) if code is not None else repr(obj)
    try:
        tree = ast.parse(text)
    except SyntaxError:  # a fragment (a lambda inside an expression): the text as written
        return text
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, _DOCUMENTED) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def sources(objects, package: str = "grokkit") -> dict[str, str]:
    """The SHA-256 of the source of every function and class of ``package`` that ``objects``
    depend on: themselves, and recursively the functions, classes and module attributes named in
    their code, their closures, defaults and partial arguments, and the fields of dataclass
    instances (a kernel family). Keyed by qualified name."""
    found: dict[str, str] = {}
    seen: set[int] = set()

    def visit(obj: Any) -> None:
        if id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
            return
        seen.add(id(obj))
        if isinstance(obj, functools.partial):
            for value in (obj.func, *obj.args, *obj.keywords.values()):
                visit(value)
        elif isinstance(obj, (list, tuple, set, frozenset)):
            for value in obj:
                visit(value)
        elif isinstance(obj, dict):
            for value in obj.values():
                visit(value)
        elif isinstance(obj, (types.MethodType, staticmethod, classmethod)):
            visit(obj.__func__)
        elif isinstance(obj, property):
            visit(obj.fget)
        elif inspect.isfunction(obj):
            if not _ours(obj, package) or generated(obj):
                return
            found[f"{obj.__module__}.{obj.__qualname__}"] = _source(obj)
            names = _names(obj.__code__)
            for name in names:
                value = obj.__globals__.get(name)
                if isinstance(value, types.ModuleType):
                    if value.__name__ == package or value.__name__.startswith(package + "."):
                        for attr in names:
                            visit(getattr(value, attr, None))
                else:
                    visit(value)
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
            visit(obj.__defaults__)
            visit(getattr(obj, "__wrapped__", None))
        elif inspect.isclass(obj):
            if _ours(obj, package):
                found[f"{obj.__module__}.{obj.__qualname__}"] = _source(obj)
                for value in vars(obj).values():
                    visit(value)
        elif dataclasses.is_dataclass(obj) and _ours(type(obj), package):
            visit(type(obj))
            for f in dataclasses.fields(obj):
                visit(getattr(obj, f.name))

    visit(objects)
    return {name: hashlib.sha256(text.encode()).hexdigest()[:16] for name, text in sorted(found.items())}


def code_fingerprint(objects, files=(), package: str = "grokkit") -> dict[str, str]:
    """What a checkpoint's code is: :func:`sources` of ``objects``, the SHA-256 of each file of
    ``files`` (the C source of fused steps), the versions of Python, numpy and torch, and
    :data:`FORMAT`. Edits of grokkit that none of these depend on leave it unchanged."""
    import numpy
    import torch

    found = sources(objects, package)
    for path in files:
        found[f"file:{Path(path).name}"] = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    found["versions"] = f"python {sys.version.split()[0]}, numpy {numpy.__version__}, torch {torch.__version__}"
    found["format"] = str(FORMAT)
    return found


# ----------------------------------------------------------------------------- the call a run belongs to

@dataclasses.dataclass
class _Scope:
    function: str
    identity: str
    fn: Any
    runs: int = 0


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("grokkit_checkpoint_scope", default=None)


@contextmanager
def scope(function: str, identity: str, fn: Any):
    """The runs inside this block belong to the call ``function`` with arguments hashed to
    ``identity`` (:func:`grokkit.cache.cached` opens it); an inner block (a cached call inside a
    cached call) names its own runs."""
    token = _scope.set(_Scope(function, identity, fn))
    try:
        yield
    finally:
        _scope.reset(token)


def wanted() -> bool:
    """Whether a run here needs a name: a checkpoint folder is set (:func:`folder`), or a deadline."""
    return folder() is not None or bool(os.environ.get(DEADLINE_ENV, "").strip())


# ----------------------------------------------------------------------------- one run's checkpoint

def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Checkpoint:
    """The checkpoint of one run of the loop: where it lives, when to save, and how to load it.

    ``label`` names the run in messages; ``objects`` and ``files`` are the code it depends on
    (:func:`code_fingerprint`, computed when first needed). Outside a cached call, or without a
    folder, there is no checkpoint (``path`` is None): then a deadline cannot be honoured, and
    the run refuses to start rather than lose its work at the deadline."""

    def __init__(self, label: str, objects, files=()):
        current = _scope.get()
        self.label, self.deadline, self.every = label, deadline(), every()
        self.path: Path | None = None
        base = folder()
        if current is not None:
            current.runs += 1
            if base is not None:
                self.path = base / current.function / f"{current.identity}-{current.runs}{SUFFIX}"
            objects = (current.fn, objects)
        if self.deadline is not None and self.path is None:
            where = ("it is not the computation of a cached call (grokkit.cache.cached)" if current is None else
                     f"no checkpoint folder is set (${ENV} or $GROKKIT_CACHE)")
            raise ValueError(f"${DEADLINE_ENV} is set, but {label} cannot be checkpointed: {where}; unset "
                             f"${DEADLINE_ENV}, or set ${ENV} to a folder")
        self.objects, self.files = objects, tuple(files)
        self._code: dict[str, str] | None = None
        self.saved_at = _now()

    @property
    def code(self) -> dict[str, str]:
        if self._code is None:
            self._code = code_fingerprint(self.objects, self.files)
        return self._code

    def load(self) -> dict | None:
        """The saved state of this run, or None to start it. A damaged file is moved aside
        (``.damaged``) with a warning; a file written by other code raises :class:`CheckpointError`."""
        if self.path is None or not self.path.is_file():
            return None
        try:
            with open(self.path, "rb") as fh:
                head = pickle.load(fh)
            payload = head["payload"]
            if len(payload) != head["bytes"] or _digest(payload) != head["sha256"]:
                raise ValueError("its content does not match its recorded size and SHA-256")
        except Exception as err:  # noqa: BLE001 -- whatever a damaged pickle raises, it is not resumed
            aside = self.path.with_name(self.path.name + ".damaged")
            os.replace(self.path, aside)
            warnings.warn(f"{self.label}: the checkpoint {self.path} is damaged ({err}); it was moved to {aside} "
                          "and the run starts over", RuntimeWarning, stacklevel=3)
            return None
        if head.get("code") != self.code:
            saved, now = head.get("code") or {}, self.code
            changed = sorted(k for k in saved.keys() | now.keys() if saved.get(k) != now.get(k))
            raise CheckpointError(
                f"{self.label}: the checkpoint {self.path} (step {head.get('t')} of {head.get('steps')}) was saved by "
                f"other code: {', '.join(changed)} changed since. Resuming it would splice two computations: "
                f"restore that code to continue the run, or delete the file to start it over")
        _events.append({"label": self.label, "resumed_at": head.get("t"), "steps": head.get("steps")})
        return pickle.loads(payload)

    def due(self, final: bool) -> str | None:
        """Why to save now: ``"deadline"`` once the deadline has passed, ``"interval"`` every
        :func:`every` seconds; None otherwise, or for the run's last record (``final``)."""
        if self.path is None or final:
            return None
        now = _now()
        if self.deadline is not None and now >= self.deadline:
            return "deadline"
        return "interval" if now - self.saved_at >= self.every else None

    def save(self, state: dict, t: int, steps: int) -> None:
        """Write ``state`` (step ``t`` of ``steps``) beside the checkpoint, then rename it into place."""
        payload = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        head = {"format": FORMAT, "label": self.label, "t": t, "steps": steps, "code": self.code,
                "page": os.environ.get(PAGE_ENV) or None,
                "bytes": len(payload), "sha256": _digest(payload), "payload": payload,
                "saved": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        with open(partial, "wb") as fh:
            pickle.dump(head, fh, protocol=pickle.HIGHEST_PROTOCOL)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(partial, self.path)
        self.saved_at = _now()

    def discard(self) -> None:
        """The run finished: its checkpoint is no longer needed."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def listing(base: Path | None = None) -> list[dict[str, Any]]:
    """The checkpoints in ``base`` (default :func:`folder`): path, run label, step reached, size, when saved."""
    base = base or folder()
    rows = []
    for path in sorted(base.rglob(f"*{SUFFIX}")) if base is not None and base.is_dir() else ():
        try:
            with open(path, "rb") as fh:
                head = pickle.load(fh)
            rows.append({"path": str(path), "label": head.get("label"), "t": head.get("t"), "page": head.get("page"),
                         "steps": head.get("steps"), "bytes": path.stat().st_size, "saved": head.get("saved")})
        except (OSError, EOFError, ValueError, KeyError, TypeError, pickle.UnpicklingError) as err:
            rows.append({"path": str(path), "label": None, "error": f"unreadable ({type(err).__name__})"})
    return rows


def summary_line(row: dict[str, Any]) -> str:
    """One line of :func:`listing` for ``grokkit checkpoints``."""
    if row.get("error"):
        return f"{row['path']}: {row['error']}"
    return (f"{row['label']}: step {row['t']:,} of {row['steps']:,}, {row['bytes'] / 1e6:.1f} MB, saved "
            f"{row['saved']}  {row['path']}")
