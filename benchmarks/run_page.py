"""Run a page's code at a preset without Jupyter: for a GPU machine that has PyTorch but not
papermill or jupytext (benchmarks/gpu_check.sh runs the paper presets of Figures 51–53 there).

The code cells of the MyST notebook are executed in order in one namespace, as papermill would,
with ``preset`` (and any ``--set name=value``, a Python literal) injected after the parameters
cell, matplotlib on its non-interactive backend, and the JSON summary written where
``--summary`` says (the page's ``report.save()``). Prints the claims table and the seconds taken;
exits 1 if a claim failed (the summary is written first).

    python benchmarks/run_page.py notebooks/neural_networks/fig52-....md --preset paper --summary out.json
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import time

CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def code_cells(text: str) -> list[tuple[list[str], str]]:
    """The (tags, source) of every code cell of a MyST notebook, in order."""
    cells = []
    for match in CELL.finditer(text):
        body = match.group(1)
        tags: list[str] = []
        options = re.match(r"---\n(.*?)\n---\n", body, re.S)
        if options:
            body = body[options.end():]
            found = re.search(r"tags:\s*\[(.*?)\]", options.group(1))
            tags = [t.strip().strip("'\"") for t in found.group(1).split(",")] if found else []
        lines = body.splitlines()
        while lines and lines[0].startswith(":"):
            found = re.match(r":tags:\s*\[(.*?)\]", lines[0])
            if found:
                tags = [t.strip().strip("'\"") for t in found.group(1).split(",")]
            lines.pop(0)
        cells.append((tags, "\n".join(lines)))
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--summary", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    os.environ["GROKKIT_SUMMARY"] = os.path.abspath(args.summary)
    overrides = {"preset": args.preset}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = ast.literal_eval(value)
    with open(args.page, encoding="utf-8") as fh:
        cells = code_cells(fh.read())
    namespace: dict = {"__name__": "__main__"}
    start = time.perf_counter()
    verify_error = None
    for tags, source in cells:
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            exec(compile(source, args.page, "exec"), namespace)
        except AssertionError as err:  # report.verify(): failed claims, after report.save()
            verify_error = err
        if "parameters" in tags:
            namespace.update(overrides)
    seconds = time.perf_counter() - start
    report = namespace.get("report")
    if report is not None:
        print(report.summary())
    print(f"{args.page}: preset {args.preset}, {seconds:.1f} s")
    if verify_error is not None:
        print(verify_error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
