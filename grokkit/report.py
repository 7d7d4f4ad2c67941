r"""Presets, measured quantities and claims checks for the notebooks.

A notebook resolves its parameters with :func:`resolve`, records what it measured
and what the paper claims with a :class:`Report`, and ends with ``report.save()``
and ``report.verify()``. ``save`` writes the JSON summary to the path in the
environment variable ``GROKKIT_SUMMARY`` (set by ``grokkit run``); outside a batch
run it writes nothing, so a notebook never writes beside its source.
"""
from __future__ import annotations

import html
import json
import math
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grokkit import cache, checkpoint, records
from grokkit._checks import check_int, check_option, check_range, check_seed, show

PRESETS = ("quick", "paper")
SUMMARY_ENV = "GROKKIT_SUMMARY"
# The parameter that `grokkit run` injects to list the knobs overridden with None (a None in the
# parameters cell means "the preset's value").
NONE_OVERRIDES = "grokkit_none"


def _positive(name: str, value: Any) -> None:
    check_range(name, value, 0.0, closed="neither")


def _nonnegative(name: str, value: Any) -> None:
    check_range(name, value, 0.0, closed="left")


def _count(name: str, value: Any) -> None:
    check_int(name, value, 1)


def _device(name: str, value: Any) -> None:
    if not (isinstance(value, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?", value)):
        raise ValueError(f"{name} must be one of 'auto', 'cpu', 'cuda', 'cuda:K', got {show(value)}")


# The valid range of each notebook parameter, by its conventional name (CONTRIBUTING.md);
# ``grid_alpha`` or ``test_threshold`` are checked as ``alpha`` and ``threshold``, and a list
# (a grid) must be non-empty, each element in range. Whether a CUDA device exists is the
# kernels' check, on the machine that runs them.
PARAMETER_CHECKS = {
    **dict.fromkeys(("n", "s", "N", "n1", "n2", "r", "depth", "steps", "trials", "d", "c", "width", "hidden",
                     "embedding", "n_train", "n_test", "m", "q", "supports", "vectors"), _count),
    "modulus": lambda name, value: check_int(name, value, 2),  # p of x1 + x2 mod p
    "train_fraction": lambda name, value: check_range(name, value, 0.0, 1.0, closed="neither"),
    "batch_size": lambda name, value: value is None or _count(name, value),
    "draws": lambda name, value: check_int(name, value, 2),  # a Monte-Carlo sample: 2 or more
    "vectors": _count,
    "max_ratio": _count,  # largest |b(1)_i|/alpha of the exact l1 dynamics (Lemma C.11)
    "bits": lambda name, value: check_int(name, value, 0, 30),
    "integer_share": lambda name, value: check_range(name, value, 0.0, 1.0),
    "seed": check_seed,
    "seeds": check_seed,  # one seed per configuration, all in one batch
    "tau": lambda name, value: check_range(name, value, 0.0, 1.0),
    "alpha": _positive,
    "alpha_decay": lambda name, value: check_range(name, value, 0.0),
    "threshold": _positive,
    "threshold_multiples": _positive,  # coefficients in units of a statement's threshold (Theorem C.4)
    "drop_level": _positive,  # a relative error marking a drop (Figure 25)
    "init_norm": _positive,  # Lyu et al.'s alpha, the initial parameter norm ||theta(0)||_2
    "gamma": _nonnegative,  # margin of Lyu et al.'s misgrokking data (Figure 1b)
    "cut": _nonnegative,  # values below it in absolute value drawn as 0 (heat maps)
    # a learning rate as a share of a stability limit (the diagonal network's at its initialisation)
    "step_fraction": lambda name, value: check_range(name, value, 0.0, 1.0, closed="right"),
    **dict.fromkeys(("beta", "beta1", "beta2", "beta_star", "init_scale", "noise_std", "decay", "eps"), _nonnegative),
    "tol": lambda name, value: check_range(name, value, 0.0, 1.0, closed="neither"),
    "snr": lambda name, value: value is None or _positive(name, value),
    "variance": lambda name, value: check_option(name, value, ("1/n", "1/N")),
    "device": _device,
}
# A knob ``<run>_<name>`` sets a second run beside a page's own, checked as ``<name>``, or None
# where the preset does not train it: the authors' published run (``reference_alpha``, Figure 52)
# or the first, faithful proposal of a setting the paper does not give (``faithful_beta``, Figure 55).
SECOND_RUNS = ("reference", "faithful")


def check_parameters(params: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the first parameter outside its range (:data:`PARAMETER_CHECKS`)."""
    for name, value in params.items():
        check = PARAMETER_CHECKS.get(name) or PARAMETER_CHECKS.get(name.partition("_")[2])
        if check is None or (value is None and name.partition("_")[0] in SECOND_RUNS):
            continue
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"{name} must be a non-empty list (a grid), got {show(value)}")
            for item in value:
                check(name, item)
        else:
            check(name, value)


def resolve(presets: dict[str, dict[str, Any]], preset: str, given: dict[str, Any]) -> dict[str, Any]:
    """Parameters of ``preset``, overridden by every knob in ``given`` that is not None, and
    checked against their ranges (:func:`check_parameters`).

    ``given`` is usually ``globals()`` of the notebook: only the keys the preset
    defines are read, so other names are ignored. A knob left at None takes the preset's value;
    the knobs named in ``given[NONE_OVERRIDES]`` (``grokkit run -p snr=None``) are None itself
    (noiseless, full batch), whatever the preset says.
    """
    if preset not in presets:
        raise ValueError(f"preset must be one of {sorted(presets)}, got {preset!r}")
    params = dict(presets[preset])
    nones = set(given.get(NONE_OVERRIDES) or ())
    for key in params:
        if key in nones:
            params[key] = None
        elif given.get(key) is not None:
            params[key] = given[key]
    check_parameters(params)
    return params


def _plain(value: Any) -> Any:
    """JSON-safe copy: numpy and torch scalars/arrays to lists, NaN/inf to None."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


CLAIM, SETUP = "claim", "setup"


@dataclass
class Claim:
    """One check on a measured number: one of the paper's claims (``kind`` "claim", with
    ``where`` the paper says it) or a check of the page's set-up (``kind`` "setup": something
    true by construction, which the scorecard does not count among the paper's claims).
    ``seeds`` > 1: ``value`` is the worst of that many seeds' values."""

    name: str
    value: Any
    expected: str
    passed: bool
    kind: str = CLAIM
    where: str = ""
    seeds: int = 1

    def line(self) -> str:
        mark = ("PASS" if self.passed else "FAIL") if self.kind == CLAIM else ("OK" if self.passed else "BROKEN")
        return f"{mark}  {self.name}: measured {self.measured()}, expected {self.expected}"

    def measured(self) -> str:
        """The value as the claims table shows it (``worst of 3 seeds: 0.12``)."""
        text = format_value(self.value, self.expected)
        return text if self.seeds == 1 else f"worst of {self.seeds} seeds: {text}"


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def format_value(value: Any, expected: str = "") -> str:
    """A measured value as the claims tables show it: three significant digits, or more where three
    would print it as a bound of ``expected`` that it is not (0.999997 against ``<= 1`` prints as
    0.999997, not 1; against ``1 ± 0.15`` the bounds are 0.85 and 1.15)."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    numbers = [float(x) for x in _NUMBER.findall(expected.replace("−", "-"))]
    bounds = set(numbers)
    if "±" in expected and len(numbers) == 2:
        bounds |= {numbers[0] - numbers[1], numbers[0] + numbers[1]}
    for digits in range(3, 18):
        text = f"{value:.{digits}g}"
        if float(text) == value or not any(math.isclose(float(text), b, rel_tol=1e-12) for b in bounds):
            return text
    return repr(value)


def _values(name: str, value: Any) -> np.ndarray:
    """A claim's value as a 1-d float array: one number, or one per seed."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    values = np.atleast_1d(np.asarray(value, dtype=float))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"the value of claim {name!r} must be a number or a non-empty 1-d sequence "
                         f"(one per seed), got shape {values.shape}")
    return values


@dataclass
class Disagreement:
    """A statement of the paper that our measurements contradict, with the evidence."""

    name: str
    paper: str
    measured: str

    def line(self) -> str:
        return f"DIFF  {self.name}: paper says {self.paper}; measured {self.measured}"


@dataclass
class Report:
    """Measured quantities, claims checks and disagreements with the paper of one notebook run.

    Every ``claim_*`` method restates a claim of the paper (``where``: the section, figure or
    caption that makes it) as a check on a measured number; the matching ``check_*`` method
    checks the page's set-up instead (counted apart on the scorecard). A value may be one number
    or one number per seed: the check then holds on every seed, and the table shows the worst.
    A NaN never passes.
    """

    notebook: str
    parameters: dict[str, Any]
    measured: dict[str, Any] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)

    def measure(self, **values: Any) -> None:
        """Record measured quantities (scalars or arrays) under their names."""
        self.measured.update(values)

    def at_paper_scale(self, chapter: str, preset: str) -> dict[str, Any] | None:
        """What this page measured at the paper's scale, for a page that sets it beside its quick
        numbers: this run's own (:meth:`measure`) when ``preset`` is ``"paper"``, else those of the
        page's record (``book/paper_runs/<chapter>/``), None where it has none yet. A paper run never
        reads its own previous record: it would compare itself with its predecessor."""
        if preset == "paper":
            return self.measured
        found = records.read(Path(__file__).parents[1], chapter, self.notebook)
        return None if found is None else found["measured"]

    # --- the paper's claims -------------------------------------------------------------------

    def claim_between(self, name: str, value: Any, low: float, high: float, *, where: str = "") -> None:
        """Claim that ``low <= value <= high`` (on every seed)."""
        self._between(name, value, low, high, CLAIM, where)

    def claim_close(self, name: str, value: Any, target: float, tol: float, *, where: str = "") -> None:
        """Claim that ``|value - target| <= tol`` (on every seed)."""
        self._close(name, value, target, tol, CLAIM, where)

    def claim_below(self, name: str, value: Any, bound: float, *, where: str = "") -> None:
        """Claim that ``value <= bound`` (on every seed)."""
        self._below(name, value, bound, CLAIM, where)

    def claim_above(self, name: str, value: Any, bound: float, *, where: str = "") -> None:
        """Claim that ``value >= bound`` (on every seed)."""
        self._above(name, value, bound, CLAIM, where)

    def claim_true(self, name: str, value: Any, expected: str = "True", *, where: str = "") -> None:
        """Claim that a measured condition holds (on every seed)."""
        self._true(name, value, expected, CLAIM, where)

    # --- checks of the set-up -----------------------------------------------------------------

    def check_between(self, name: str, value: Any, low: float, high: float) -> None:
        """Check of the set-up that ``low <= value <= high``."""
        self._between(name, value, low, high, SETUP, "")

    def check_close(self, name: str, value: Any, target: float, tol: float) -> None:
        """Check of the set-up that ``|value - target| <= tol``."""
        self._close(name, value, target, tol, SETUP, "")

    def check_below(self, name: str, value: Any, bound: float) -> None:
        """Check of the set-up that ``value <= bound``."""
        self._below(name, value, bound, SETUP, "")

    def check_above(self, name: str, value: Any, bound: float) -> None:
        """Check of the set-up that ``value >= bound``."""
        self._above(name, value, bound, SETUP, "")

    def check_true(self, name: str, value: Any, expected: str = "True") -> None:
        """Check of the set-up that a condition holds."""
        self._true(name, value, expected, SETUP, "")

    def disagree(self, name: str, paper: str, measured: str) -> None:
        """Record where the measurements contradict the paper (shown in the notebook, kept in the JSON)."""
        d = Disagreement(name, paper, measured)
        self.disagreements = [x for x in self.disagreements if x.name != name] + [d]

    def _between(self, name, value, low, high, kind, where) -> None:
        v = _values(name, value)
        ok = (v >= low) & (v <= high)
        worst = v[np.argmax(np.where(np.isnan(v), np.inf, np.maximum(low - v, v - high)))]
        self._add(name, worst, f"in [{format_value(low)}, {format_value(high)}]", ok.all(), kind, where,
                  v.size)

    def _close(self, name, value, target, tol, kind, where) -> None:
        v = _values(name, value)
        gap = np.where(np.isnan(v), np.inf, np.abs(v - target))
        self._add(name, v[np.argmax(gap)], f"{format_value(target)} ± {format_value(tol)}", (gap <= tol).all(),
                  kind, where, v.size)

    def _below(self, name, value, bound, kind, where) -> None:
        v = _values(name, value)
        worst = np.nan if np.isnan(v).any() else v.max()
        self._add(name, worst, f"<= {format_value(bound)}", worst <= bound, kind, where, v.size)

    def _above(self, name, value, bound, kind, where) -> None:
        v = _values(name, value)
        worst = np.nan if np.isnan(v).any() else v.min()
        self._add(name, worst, f">= {format_value(bound)}", worst >= bound, kind, where, v.size)

    def _true(self, name, value, expected, kind, where) -> None:
        v = np.atleast_1d(np.asarray(value, dtype=bool))
        self._add(name, bool(v.all()), expected, bool(v.all()), kind, where, v.size)

    def _add(self, name: str, value: Any, expected: str, passed: Any, kind: str, where: str, seeds: int) -> None:
        if isinstance(value, np.floating):
            value = float(value)
        passed = bool(passed) and not (isinstance(value, float) and math.isnan(value))
        claim = Claim(name, value, expected, passed, kind, where, seeds)
        self.claims = [c for c in self.claims if c.name != name] + [claim]

    def summary(self) -> str:
        """One line per claim (PASS or FAIL), per set-up check (OK or BROKEN), measured and
        expected, and per disagreement (DIFF)."""
        return "\n".join([c.line() for c in self.claims] + [d.line() for d in self.disagreements])

    def table(self) -> ClaimsTable:
        """The claims, disagreements and set-up checks as a table (claim, measured, paper,
        verdict): HTML in a notebook, the :meth:`summary` lines as text."""
        return ClaimsTable(self)

    def to_dict(self) -> dict[str, Any]:
        import torch

        return _plain({
            "notebook": self.notebook,
            "parameters": self.parameters,
            "measured": self.measured,
            "claims": [
                {"name": c.name, "value": c.value, "expected": c.expected, "pass": c.passed,
                 "kind": c.kind, "where": c.where, "seeds": c.seeds}
                for c in self.claims
            ],
            "all_claims_pass": all(c.passed for c in self.claims),
            "disagreements": [{"name": d.name, "paper": d.paper, "measured": d.measured}
                              for d in self.disagreements],
            "cache": cache.events(),
            "kernels": cache.calls(),
            "checkpoints": checkpoint.events(),
            "device": "cuda" if torch.cuda.is_available() else "cpu",
            "versions": {
                "python": platform.python_version(),
                "numpy": np.__version__,
                "torch": torch.__version__,
                "grokkit": _grokkit_version(),
            },
        })

    def save(self) -> str | None:
        """Write the JSON summary to ``$GROKKIT_SUMMARY`` (relative to the working folder, where
        ``grokkit run`` gives each notebook its own); return the path (None if unset)."""
        path = os.environ.get(SUMMARY_ENV)
        if not path:
            return None
        path = os.path.abspath(path)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.to_dict(), fh, indent=2, allow_nan=False)
        return path

    def verify(self) -> None:
        """Raise ``AssertionError`` naming every claim and set-up check that failed."""
        failed = [c.line() for c in self.claims if not c.passed]
        if failed:
            raise AssertionError("claims failed:\n" + "\n".join(failed))


class ClaimsTable:
    """What ``report.table()`` displays: one row per claim (PASS or FAIL) and per disagreement
    with the paper (DIFF), in a table that wraps to the page's column."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(claim, measured, paper, verdict): each of the paper's claims, each disagreement, then
        each check of the set-up."""
        claims = [c for c in self.report.claims if c.kind == CLAIM]
        setup = [c for c in self.report.claims if c.kind != CLAIM]
        return ([(c.name + (f" ({c.where})" if c.where else ""), c.measured(), c.expected,
                  "PASS" if c.passed else "FAIL") for c in claims]
                + [(d.name, d.measured, d.paper, "DIFF") for d in self.report.disagreements]
                + [(c.name, c.measured(), c.expected, "OK" if c.passed else "BROKEN") for c in setup])

    def __repr__(self) -> str:
        return self.report.summary()

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("claim", "measured", "paper", "verdict"))
        rows = self.rows()
        n_setup = sum(c.kind != CLAIM for c in self.report.claims)
        body = []
        for i, row in enumerate(rows):
            if n_setup and i == len(rows) - n_setup:
                body.append('<tr class="setup-heading"><td colspan="4">Checks of the set-up '
                            '(true by construction; not counted among the paper\'s claims)</td></tr>')
            body.append("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row[:3])
                        + f'<td class="verdict-{row[3].lower()}">{row[3]}</td></tr>')
        return f'<table class="claims"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _grokkit_version() -> str:
    from grokkit import __version__

    return __version__
