"""Argument checks shared by grokkit's public functions (scikit-learn's message template).

Each check names the parameter, gives the valid type or range, quotes the value as the
user wrote it (:func:`show`) and raises ``ValueError``, for a wrong type as for a value out
of range, before any compute.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np

SEED_HIGH = 2**32 - 1  # numpy's RandomState accepts seeds in [0, 2**32 - 1]


def _plain(value: Any) -> Any:
    """Numpy scalars and 0-d numpy or torch arrays as the Python scalar they hold; else ``value``."""
    return value.item() if getattr(value, "ndim", None) == 0 and hasattr(value, "item") else value


def show(value: Any) -> str:
    """``repr`` of ``value`` as the user wrote it: ``0.0``, ``None``, never ``np.float64(0.0)``."""
    value = _plain(value)
    if isinstance(value, list):
        return "[" + ", ".join(map(show, value)) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(map(show, value)) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _interval(low: float, high: float, left: str = "[", right: str = "]") -> str:
    return f"{left}{low}, {high}{right}" if math.isfinite(high) else f"{left}{low}, inf)"


def check_int(name: str, value: Any, low: int, high: float = math.inf, *, high_name: str = "") -> int:
    """``value`` as an int in ``[low, high]``, else ``ValueError`` naming the parameter.

    Integral floats (``1e6``) are accepted; bools, strings and other types are not.
    ``high_name`` spells the upper bound (``"n"`` gives ``[1, n] = [1, 10]``)."""
    x = _plain(value)
    ok = (isinstance(x, numbers.Integral) or isinstance(x, numbers.Real) and math.isfinite(x)
          and float(x).is_integer()) and not isinstance(x, bool) and low <= x <= high
    if not ok:
        rng = _interval(low, high)
        if high_name:
            rng = f"[{low}, {high_name}] = {rng}"
        raise ValueError(f"{name} must be an integer in {rng}, got {show(value)}")
    return int(x)


def check_seed(name: str, value: Any) -> int:
    """``value`` as a seed: an integer (Python or numpy) in ``[0, 2**32 - 1]``; bools and floats refused."""
    x = _plain(value)
    if not isinstance(x, numbers.Integral) or isinstance(x, bool) or not 0 <= x <= SEED_HIGH:
        raise ValueError(f"{name} must be an integer in [0, 2**32 - 1] (a seed), got {show(value)}")
    return int(x)


def check_range(name: str, value: Any, low: float, high: float = math.inf,
                closed: str = "both") -> float:
    """``value`` as a float in the interval; ``closed`` is 'both', 'left', 'right' or 'neither'."""
    left = "[" if closed in ("both", "left") else "("
    right = "]" if closed in ("both", "right") else ")"
    x = _plain(value)
    if not isinstance(x, numbers.Real) or isinstance(x, bool):
        raise ValueError(f"{name} must be a number in {left}{low}, {high}{right}, got {show(value)}")
    x = float(x)
    ok_low = x >= low if left == "[" else x > low
    ok_high = x <= high if right == "]" else x < high
    if math.isnan(x) or not (ok_low and ok_high):
        raise ValueError(f"{name} must be in {left}{low}, {high}{right}, got {show(value)}")
    return x


def check_grid(name: str, values: Any, low: float = -math.inf, high: float = math.inf,
               closed: str = "neither") -> np.ndarray:
    """``values`` (a number or an array-like of numbers) as a float array of the same shape: at
    least one value (a grid is never empty), each checked by :func:`check_range`."""
    entries = np.asarray(values, dtype=object)
    if entries.size == 0:
        raise ValueError(f"{name} must have at least one value (a grid is never empty), got {show(values)}")
    for v in entries.flat:
        check_range(name, v, low, high, closed)
    return np.asarray(values, dtype=float)


def check_real(name: str, array: Any) -> None:
    """Raise if ``array`` (numpy or torch) is complex: converted to float64, it would lose its
    imaginary part silently."""
    a = array if hasattr(array, "is_complex") else np.asarray(array)
    if a.is_complex() if hasattr(a, "is_complex") else np.iscomplexobj(a):
        raise ValueError(f"{name} must be real, got a complex array (dtype {a.dtype}): pass its real part, or "
                         f"use a real basis (the kernels run in float64)")


def check_finite(name: str, array: Any, *, real: bool = False) -> None:
    """Raise unless every entry of ``array`` (numpy or torch) is finite, quoting the first bad entry;
    with ``real``, also unless it is real (a complex array would otherwise lose its imaginary part,
    silently, where the kernels convert it to float64)."""
    a = array if hasattr(array, "isfinite") else np.asarray(array)  # torch tensors have isfinite
    if real:
        check_real(name, a)
    if not hasattr(a, "isfinite") and not np.iscomplexobj(a):  # complex arrays (a Fourier basis) stay complex
        a = np.asarray(a, dtype=float)
    finite = a.isfinite() if hasattr(a, "isfinite") else np.isfinite(a)
    if not finite.all():
        bad = np.argwhere(np.asarray((~finite).cpu() if hasattr(finite, "cpu") else ~finite))
        index = tuple(int(i) for i in bad[0])
        where = f" at index {index[0] if len(index) == 1 else index}" if index else ""
        raise ValueError(f"{name} must be finite, got {show(a[index])}{where} "
                         f"({len(bad)} non-finite entr{'y' if len(bad) == 1 else 'ies'})")


def check_option(name: str, value: Any, options: Iterable[str]) -> str:
    """``value`` if it is one of ``options``, else ``ValueError`` listing them."""
    options = tuple(options)
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(show, options))}, got {show(value)}")
    return value
