r"""A result cache for grokkit's expensive calls: kernel runs, convex baselines, trainings.

Many pages of the book draw on the same runs (Figures 1 and 12, 2 and 11, 8–10, …): each
page keeps its own notebook, and a run behind several of them is computed once. A function
decorated with :func:`cached` stores its result (a pickle, ``entries/<function>/<key>/``) under
the folder named by the environment variable ``GROKKIT_CACHE``; without it, nothing is cached
and the function simply runs. ``grokkit run`` sets the variable (``--cache``, default ``.cache/`` at
the top of the repository, which git ignores); in Jupyter, set it yourself::

    import os; os.environ["GROKKIT_CACHE"] = os.path.expanduser("~/.cache/grokkit/results")

The key covers the function, every argument, the hash of grokkit's own source
(:func:`source_hash`: a changed kernel never serves a stale result) and the numpy and torch
versions. Two processes asking for the same entry at once compute it once: a lock per
entry makes the second wait for the first, then read its result. Nothing stored is trusted
unchecked: each entry's record, written after its result, holds the result's size and SHA-256,
and an entry that does not match them (truncated, overwritten, half-written) is recomputed and
replaced. :func:`events` lists the cached calls of this process, whether each came from the
cache and why a damaged one was recomputed; a notebook's JSON summary records them, the page
says which came from the cache, and ``grokkit run`` names the recomputed ones.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pickle
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grokkit import checkpoint

ENV = "GROKKIT_CACHE"
_PACKAGE = Path(__file__).resolve().parent
_SOURCES = ("*.py", "*.c")
_events: list[dict[str, Any]] = []
_calls: set[str] = set()  # every cached function called in this process (module.name)


@functools.cache
def source_hash() -> str:
    """SHA-256 (16 hex digits) of every ``.py`` and ``.c`` file of the grokkit package."""
    digest = hashlib.sha256()
    files = sorted(p for pattern in _SOURCES for p in _PACKAGE.rglob(pattern))
    for path in files:
        digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def directory() -> Path | None:
    """The cache folder (``$GROKKIT_CACHE``), or None when caching is off."""
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser().resolve() if value else None


def _token() -> str:
    import numpy
    import torch

    return f"grokkit={source_hash()} numpy={numpy.__version__} torch={torch.__version__}"


def _plain(value: Any) -> Any:
    """What the key of an argument is made of, so that it depends on values only (pickles of
    tensors and modules differ from one process to the next): tensors as numpy arrays, a torch
    module as its class, its ``repr`` and its parameters and buffers, a dataclass as its class and
    fields."""
    import torch

    if isinstance(value, torch.nn.Module):
        return (type(value).__qualname__, repr(value), _plain(dict(value.state_dict())))
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__, {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)})
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


ENTRIES = "entries"   # <folder>/entries/<function>/<key>/{result.pkl, entry.json}
RESULT, RECORD = "result.pkl", "entry.json"


def _digest(path: Path) -> str:
    """SHA-256 of the file at ``path``, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _load(entry: Path) -> tuple[Any, str | None]:
    """The result stored in ``entry`` and None, or (None, why it cannot be used). An entry is used
    only when its record (written after the result) names the result's size and SHA-256 and the
    result has them: a truncated or overwritten entry is a miss, never a wrong result."""
    record = entry / RECORD
    if not record.is_file():
        return None, None if not entry.exists() else "no record (an interrupted write)"
    try:
        meta = json.loads(record.read_text(encoding="utf-8"))
        result = entry / RESULT
        if result.stat().st_size != meta["bytes"]:
            return None, f"size {result.stat().st_size} bytes, recorded {meta['bytes']}"
        if _digest(result) != meta["sha256"]:
            return None, "checksum mismatch"
        with open(result, "rb") as fh:
            return pickle.load(fh), None
    except (OSError, ValueError, KeyError, TypeError, EOFError, AttributeError, ImportError,
            pickle.UnpicklingError) as err:
        return None, f"unreadable ({type(err).__name__}: {err})"


def _store(entry: Path, function: str, value: Any) -> None:
    """Write ``value`` into ``entry``: the result, then its record with size and SHA-256, each
    through a temporary file renamed into place."""
    entry.mkdir(parents=True, exist_ok=True)
    partial = entry / f".{RESULT}.{os.getpid()}.partial"
    with open(partial, "wb") as fh:
        pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(partial, entry / RESULT)
    meta = {"function": function, "bytes": (entry / RESULT).stat().st_size, "sha256": _digest(entry / RESULT)}
    partial = entry / f".{RECORD}.{os.getpid()}.partial"
    partial.write_text(json.dumps(meta) + "\n", encoding="utf-8")
    os.replace(partial, entry / RECORD)


def cached(fn: Callable) -> Callable:
    """Cache ``fn``'s results under ``$GROKKIT_CACHE`` (module docstring). A ``progress``
    argument does not enter the key: it changes what is shown, not the result.

    An entry that does not verify (truncated, overwritten, unreadable) is a miss: the result is
    recomputed and replaces it, and the event records why (``recomputed``). A result that cannot be
    stored (a full or read-only disk) is still returned, with one warning."""
    function = f"{fn.__module__}.{fn.__name__}"

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _calls.add(function)
        folder = directory()
        if folder is None and not checkpoint.wanted():
            return fn(*args, **kwargs)
        import joblib

        shown = kwargs.pop("progress", None)
        # The checkpoints of a call are named by its arguments only: they record the code they depend on.
        identity = joblib.hash((function, _plain(args), _plain(kwargs)))
        with checkpoint.scope(function, identity, fn):
            if folder is None:
                return fn(*args, **kwargs, **({} if shown is None else {"progress": shown}))
            return _cached_call(fn, function, folder, args, kwargs)

    return wrapper


def _cached_call(fn: Callable, function: str, folder: Path, args: tuple, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)`` through the cache in ``folder`` (:func:`cached`)."""
    import joblib
    from filelock import FileLock

    key = joblib.hash((function, _token(), _plain(args), _plain(kwargs)))
    entry = folder / ENTRIES / fn.__name__ / key
    event: dict[str, Any] = {"function": fn.__name__, "key": key, "hit": False}
    try:
        (folder / "locks").mkdir(parents=True, exist_ok=True)
        lock = FileLock(folder / "locks" / f"{key}.lock")
        lock.acquire()
    except OSError as err:
        warnings.warn(f"grokkit: the result cache {folder} cannot be used ({err}); computing without it",
                      RuntimeWarning, stacklevel=3)
        return fn(*args, **kwargs)
    try:
        result, damage = _load(entry)
        if damage is None and (entry / RECORD).is_file():
            event["hit"] = True
        else:
            if damage is not None:
                event["recomputed"] = damage
                shutil.rmtree(entry, ignore_errors=True)
            result = fn(*args, **kwargs)
            try:
                _store(entry, fn.__name__, result)
            except (OSError, pickle.PicklingError) as err:
                shutil.rmtree(entry, ignore_errors=True)
                warnings.warn(f"grokkit: could not store {fn.__name__}'s result in the cache {folder} ({err}); "
                              "the result is used, not kept", RuntimeWarning, stacklevel=3)
    finally:
        lock.release()
    _events.append(event)
    return result


def calls() -> list[str]:
    """The cached functions this process called (``module.name``), with or without a cache:
    the kernels a page's numbers come from (:mod:`grokkit.records` is stale against their code)."""
    return sorted(_calls)


def events() -> list[dict[str, Any]]:
    """The cached calls of this process, in order: ``function``, ``key`` and ``hit``."""
    return [dict(e) for e in _events]


def info(folder: Path) -> dict[str, Any]:
    """Entries, size in bytes and entries per function of the cache in ``folder``."""
    entries: dict[str, int] = {}
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    for record in folder.glob(f"{ENTRIES}/*/*/{RECORD}"):
        name = record.parent.parent.name
        entries[name] = entries.get(name, 0) + 1
    return {"folder": str(folder), "entries": sum(entries.values()), "bytes": size, "by_function": entries}


def clear(folder: Path) -> int:
    """Remove every entry of the cache in ``folder``; return how many there were."""
    if not folder.is_dir():
        return 0
    count = info(folder)["entries"]
    for name in (ENTRIES, "locks", "joblib"):  # joblib: the layout of grokkit before 0.2
        shutil.rmtree(folder / name, ignore_errors=True)
    return count
