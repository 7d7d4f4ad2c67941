"""Argument checks shared by grokkit's public functions (scikit-learn's message template)."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def check_int(name: str, value: Any, low: int, high: float = math.inf) -> int:
    """``value`` as an int in ``[low, high]``, else ``ValueError`` naming the parameter."""
    if isinstance(value, bool) or not float(value).is_integer() or not low <= value <= high:
        rng = f"[{low}, {high}]" if math.isfinite(high) else f"[{low}, inf)"
        raise ValueError(f"{name} must be an integer in {rng}, got {value!r}")
    return int(value)


def check_range(name: str, value: Any, low: float, high: float = math.inf,
                closed: str = "both") -> float:
    """``value`` as a float in the interval; ``closed`` is 'both', 'left', 'right' or 'neither'."""
    left = "[" if closed in ("both", "left") else "("
    right = "]" if closed in ("both", "right") else ")"
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in {left}{low}, {high}{right}, got {value!r}") from None
    ok_low = x >= low if left == "[" else x > low
    ok_high = x <= high if right == "]" else x < high
    if math.isnan(x) or not (ok_low and ok_high):
        raise ValueError(f"{name} must be in {left}{low}, {high}{right}, got {value!r}")
    return x


def check_option(name: str, value: Any, options: Iterable[str]) -> str:
    """``value`` if it is one of ``options``, else ``ValueError`` listing them."""
    options = tuple(options)
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}, got {value!r}")
    return value
