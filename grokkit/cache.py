r"""A result cache for grokkit's expensive calls: kernel runs, convex baselines, trainings.

Many pages of the book draw on the same runs (Figures 1 and 12, 2 and 11, 8–10, …): each
page keeps its own notebook, and a run behind several of them is computed once. A function
decorated with :func:`cached` stores its result in a :class:`joblib.Memory` under the folder
named by the environment variable ``GROKKIT_CACHE``; without it, nothing is cached and the
function simply runs. ``grokkit run`` sets the variable (``--cache``, default ``.cache/`` at
the top of the repository, which git ignores); in Jupyter, set it yourself::

    import os; os.environ["GROKKIT_CACHE"] = os.path.expanduser("~/.cache/grokkit/results")

The key covers the function, every argument, the hash of grokkit's own source
(:func:`source_hash`: a changed kernel never serves a stale result) and the numpy and torch
versions. Two processes asking for the same entry at once compute it once: a lock per
entry makes the second wait for the first, then read its result. :func:`events` lists the
cached calls of this process and whether each came from the cache; a notebook's JSON
summary records them, and the page says so.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "GROKKIT_CACHE"
_PACKAGE = Path(__file__).resolve().parent
_SOURCES = ("*.py", "*.c")
_events: list[dict[str, Any]] = []


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


def _call(function: str, token: str, key: str, args: tuple, kwargs: dict) -> Any:
    """Run the undecorated ``function`` (``module.name``); ``token`` and ``key`` only enter the
    cache's key, ``args`` and ``kwargs`` do not (``key`` stands for them)."""
    module, name = function.rsplit(".", 1)
    return getattr(importlib.import_module(module), name).__wrapped__(*args, **kwargs)


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


def cached(fn: Callable) -> Callable:
    """Cache ``fn``'s results under ``$GROKKIT_CACHE`` (module docstring). A ``progress``
    argument does not enter the key: it changes what is shown, not the result."""
    function = f"{fn.__module__}.{fn.__name__}"

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        folder = directory()
        if folder is None:
            return fn(*args, **kwargs)
        import joblib
        from filelock import FileLock

        kwargs.pop("progress", None)
        token = _token()
        memo = joblib.Memory(folder, verbose=0).cache(_call, ignore=["args", "kwargs"])
        key = joblib.hash((function, token, _plain(args), _plain(kwargs)))
        (folder / "locks").mkdir(parents=True, exist_ok=True)
        with FileLock(folder / "locks" / f"{key}.lock"):
            hit = memo.check_call_in_cache(function, token, key, args, kwargs)
            result = memo(function, token, key, args, kwargs)
        _events.append({"function": fn.__name__, "key": key, "hit": bool(hit)})
        return result

    return wrapper


def events() -> list[dict[str, Any]]:
    """The cached calls of this process, in order: ``function``, ``key`` and ``hit``."""
    return [dict(e) for e in _events]


def info(folder: Path) -> dict[str, Any]:
    """Entries, size in bytes and entries per function of the cache in ``folder``."""
    entries: dict[str, int] = {}
    size = 0
    for path in folder.rglob("*"):
        if path.is_file():
            size += path.stat().st_size
        if path.name == "metadata.json":
            try:
                name = json.loads(path.read_text(encoding="utf-8"))["input_args"]["function"]
            except (OSError, ValueError, KeyError):
                name = "?"
            name = name.strip("'\"").rsplit(".", 1)[-1]
            entries[name] = entries.get(name, 0) + 1
    return {"folder": str(folder), "entries": sum(entries.values()), "bytes": size, "by_function": entries}


def clear(folder: Path) -> int:
    """Remove every entry of the cache in ``folder``; return how many there were."""
    if not folder.is_dir():
        return 0
    import joblib

    count = info(folder)["entries"]
    joblib.Memory(folder, verbose=0).clear(warn=False)
    shutil.rmtree(folder / "locks", ignore_errors=True)
    return count
