"""Project the paper preset of a page onto this machine from a measured slice of it.

The page's code runs at its paper preset (as ``benchmarks/run_page.py`` runs it) with each of its
step counts cut to a slice; every loop of :mod:`grokkit.kernels.run` it starts is timed, and each
loop's time in its steps is scaled by the ratio of the paper's steps to the slice's, the rest (the
records of the log schedule, and the set-up) by the ratio of their records. A slice keeps the
paper's grid, problem sizes and devices, so only the number of steps changes. Runs that an exact
periodic stop or a divergence cut short in the paper's run are counted in full. The result cache is off. Prints a Markdown table
(page, loops, slice seconds, fraction of the paper's steps, projected time) and writes JSON.

    python benchmarks/project_presets.py fig47-teacher-student-l1 fig33 ... [--fraction 0.002] [--json out.json]

A page is named by its stem or a prefix of it (``fig47``); ``--fraction`` sets the slice (the
smallest slice is 200 steps, and a page's own parameters say which values are its step counts,
:data:`STEPS`).
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The parameters that hold a page's step counts, where they are not ``steps``.
STEPS = {"fig03-teacher-student": ("l1_steps", "sobolev_steps")}


def _run_page():
    spec = importlib.util.spec_from_file_location("run_page", Path(__file__).with_name("run_page.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find(name: str) -> Path:
    pages = sorted(ROOT.glob(f"notebooks/*/{name}*.md"))
    if len(pages) != 1:
        raise SystemExit(f"page must name one notebook (a stem or its prefix), got {name!r}: "
                         f"{len(pages)} match ({', '.join(p.stem for p in pages[:5])})")
    return pages[0]


def paper_preset(cells) -> dict:
    """The page's ``PRESETS["paper"]``, read from its code (a dict of literals and ``dict(...)``)."""
    import numpy as np

    for _, source, _ in cells:
        for node in ast.walk(ast.parse("\n".join(l for l in source.splitlines() if not l.lstrip().startswith("%")))):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PRESETS" for t in node.targets):
                return eval(compile(ast.Expression(node.value), "PRESETS", "eval"), {"dict": dict, "np": np})["paper"]
    raise SystemExit("the page has no PRESETS dict")


def project(page: Path, fraction: float) -> dict:
    """Run ``page`` at its paper preset with its step counts cut to ``fraction`` and project."""
    import grokkit.kernels.run as loop

    runner = _run_page()
    cells = runner.code_cells(page.read_text(encoding="utf-8"))
    namespace: dict = {"__name__": "__main__"}
    loops: list[dict] = []
    original = loop.run

    def timed(family, method, step, data, config, x0, steps, **kwargs):
        start = time.perf_counter()
        result = original(family, method, step, data, config, x0, steps, **kwargs)
        schedule = {k: kwargs[k] for k in ("dense", "per_decade") if k in kwargs}
        loops.append({"method": method, "G": int(config["alpha"].size), "steps": int(steps),
                      "seconds": time.perf_counter() - start, "step_s": result.step_seconds, "schedule": schedule,
                      "backend": getattr(result, "backend", "torch")})
        return result

    names = STEPS.get(page.stem, ("steps",))
    presets = paper_preset(cells)
    paper: dict[int, int] = {}  # slice steps -> paper steps
    cuts = {}
    for k, name in enumerate(names):
        full = int(presets[name])
        cut = max(200, int(full * fraction)) + k  # distinct per parameter, to tell the loops apart
        paper[cut], cuts[name] = full, cut
    start, failed = time.perf_counter(), None
    for module in [m for m in list(sys.modules.values()) if getattr(m, "run", None) is original]:
        module.run = timed
    try:
        for tags, source, _ in cells:
            source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            try:
                exec(compile(source, str(page), "exec"), namespace)
            except AssertionError:  # report.verify(): a slice's claims may fail; only its time counts
                pass
            except Exception as err:  # noqa: BLE001 -- a later cell may need the whole run; the loops are timed
                failed = f"{type(err).__name__}: {err}"
                break
            if "parameters" in tags:
                namespace.update(preset="paper", **cuts)
    finally:
        for module in [m for m in list(sys.modules.values()) if getattr(m, "run", None) is timed]:
            module.run = original
    seconds = time.perf_counter() - start
    for r in loops:  # the steps scale with the steps, the records (and set-up) with the records
        full = paper.get(r["steps"], r["steps"])
        records = [loop.log_schedule(s, **r["schedule"]).size for s in (r["steps"], full)]
        r["projected_s"] = r["step_s"] * full / r["steps"] + (r["seconds"] - r["step_s"]) * records[1] / records[0]
    projected = sum(r["projected_s"] for r in loops)
    unknown = [r for r in loops if r["steps"] not in paper]
    return {"page": page.stem, "loops": loops, "slice_s": seconds, "loop_s": sum(r["seconds"] for r in loops),
            "fraction": min((c / f for c, f in paper.items()), default=1.0), "projected_s": projected,
            "unscaled_loops": len(unknown), "failed_after": failed}


def _hours(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+")
    parser.add_argument("--fraction", type=float, default=0.002)
    parser.add_argument("--json")
    args = parser.parse_args()
    if not 0 < args.fraction <= 1:
        raise SystemExit(f"--fraction must be in (0, 1], got {args.fraction}")
    import matplotlib

    matplotlib.use("Agg")
    os.environ.pop("GROKKIT_CACHE", None)
    os.environ["GROKKIT_SUMMARY"] = os.devnull
    rows = []
    for name in args.pages:
        page = find(name)
        try:
            rows.append(project(page, args.fraction))
        except Exception as err:  # noqa: BLE001 -- a page that fails at the paper preset is a finding: report it
            rows.append({"page": page.stem, "error": f"{type(err).__name__}: {err}"})
    print("| page | loops (configurations × slice steps, backend) | slice of the paper's steps | loop time | "
          "projected paper preset |")
    print("|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['page']} | failed at the paper preset: {r['error']} | | | |")
            continue
        after = f" (then the page failed: {r['failed_after']})" if r["failed_after"] else ""
        loops = "; ".join(f"{x['method']} {x['G']} × {x['steps']:,} ({x['backend']})" for x in r["loops"])
        print(f"| {r['page']} | {loops} | {100 * r['fraction']:.2g} % | {r['loop_s']:.1f} s | "
              f"**{_hours(r['projected_s'])}**{' (some loops not scaled)' if r['unscaled_loops'] else ''}{after} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
