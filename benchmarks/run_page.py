"""Run a page's code at a preset without Jupyter: for a GPU machine that has PyTorch but not
papermill or jupytext (benchmarks/gpu_check.sh runs the paper presets of Figures 51–53 there).

The code cells of the MyST notebook are executed in order in one namespace, as papermill would,
with ``preset`` (and any ``--set name=value``, a Python literal) injected after the parameters
cell, matplotlib on its non-interactive backend, and the JSON summary written where
``--summary`` says (the page's ``report.save()``). Prints the claims table and the seconds taken;
exits 1 if a claim failed (the summary is written first), 3 if a run stopped at its deadline.

With ``--record``, the run (at the paper preset, no ``--set``) is also kept as the page's
paper-scale record in ``book/paper_runs/<chapter>/`` (:mod:`grokkit.records`): its figures, a
notebook of its code cells with their outputs, and the provenance of this machine; the commit is
``$GROKKIT_COMMIT`` where the copy has no git history (a GPU machine's working tree). Its runs
checkpoint into ``book/paper_runs/checkpoints`` (unless ``$GROKKIT_CHECKPOINTS`` says otherwise)
and stop cleanly at ``$GROKKIT_DEADLINE``; the same command continues them.

    python benchmarks/run_page.py notebooks/neural_networks/fig52-....md --preset paper --summary out.json
"""
from __future__ import annotations

import argparse
import ast
import base64
import os
import re
import sys
import time
from pathlib import Path

CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def code_cells(text: str) -> list[tuple[list[str], str, dict]]:
    """The (tags, source, figure caption metadata) of every code cell of a MyST notebook, in order."""
    import yaml

    cells = []
    for match in CELL.finditer(text):
        body = match.group(1)
        tags: list[str] = []
        meta: dict = {}
        options = re.match(r"---\n(.*?)\n---\n", body, re.S)
        if options:
            body = body[options.end():]
            found = re.search(r"tags:\s*\[(.*?)\]", options.group(1))
            tags = [t.strip().strip("'\"") for t in found.group(1).split(",")] if found else []
            parsed = yaml.safe_load(options.group(1)) or {}
            meta = {"mystnb": parsed["mystnb"]} if isinstance(parsed, dict) and "mystnb" in parsed else {}
        lines = body.splitlines()
        while lines and lines[0].startswith(":"):
            found = re.match(r":tags:\s*\[(.*?)\]", lines[0])
            if found:
                tags = [t.strip().strip("'\"") for t in found.group(1).split(",")]
            lines.pop(0)
        cells.append((tags, "\n".join(lines), meta))
    return cells


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--summary", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--record", action="store_true",
                        help="keep the run as the page's paper-scale record in book/paper_runs/<chapter>/")
    args = parser.parse_args()
    if args.record and (args.preset != "paper" or args.set):
        parser.error("--record keeps the paper preset's own run: use --preset paper and no --set")
    from grokkit import checkpoint, records

    if args.record:  # a recorded run checkpoints into the repository, as `grokkit run --record` does
        os.environ.setdefault(checkpoint.ENV, str(Path(__file__).resolve().parents[1] / records.CHECKPOINTS))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import nbformat

    os.environ["GROKKIT_SUMMARY"] = os.path.abspath(args.summary)
    overrides = {"preset": args.preset}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = ast.literal_eval(value)
    with open(args.page, encoding="utf-8") as fh:
        cells = code_cells(fh.read())
    namespace: dict = {"__name__": "__main__"}
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    start, cpu = time.perf_counter(), time.process_time()
    verify_error = None
    executed = []
    for tags, source, meta in cells:
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            exec(compile(source, args.page, "exec"), namespace)
        except AssertionError as err:  # report.verify(): failed claims, after report.save()
            verify_error = err
        except checkpoint.DeadlineReached as err:  # its state is saved: the same command continues it
            print(f"{args.page}: {err}")
            return 3
        if "parameters" in tags:
            namespace.update(overrides)
        outputs = []
        if args.record:
            from grokkit.plots import png

            for number in plt.get_fignums():
                figure = plt.figure(number)
                data, shape = png(figure)
                outputs.append(nbformat.v4.new_output("display_data", data={
                    "image/png": base64.b64encode(data).decode("ascii")}, metadata={"image/png": shape}))
                plt.close(figure)
        executed.append(nbformat.v4.new_code_cell(source, outputs=outputs, metadata={"tags": tags, **meta}))
    seconds = time.perf_counter() - start
    report = namespace.get("report")
    if report is not None:
        print(report.summary())
    print(f"{args.page}: preset {args.preset}, {seconds:.1f} s")
    if args.record and report is not None:
        print(f"recorded: {record(Path(args.page), nbformat.v4.new_notebook(cells=executed), args.summary, started_at, seconds, time.process_time() - cpu)}")
    if verify_error is not None:
        print(verify_error)
        return 1
    return 0


def record(page: Path, notebook, summary: str, started_at: str, seconds: float, cpu_s: float) -> Path:
    """Keep this run as the page's record (grokkit.records), with this machine's provenance."""
    import json

    import nbformat

    from grokkit import cache, records

    root = Path(__file__).resolve().parents[1]
    page = page.resolve()
    data = json.loads(Path(summary).read_text(encoding="utf-8"))
    commit = records.commit(root)
    provenance = {
        "commit": os.environ.get("GROKKIT_COMMIT") or commit, "dirty_files": records.dirty_files(root),
        "started_at": started_at, "wall_s": round(seconds, 1), "kernel_cpu_s": round(cpu_s, 1),
        "machine": records.machine(), "grokkit_sha256": cache.source_hash(),
        "requirements_lock_sha256": records.lock_sha256(root),
        "cached_runs": f"{sum(bool(e.get('hit')) for e in data.get('cache', []))} of {len(data.get('cache', []))}",
        "resumed_from_checkpoints": data.get("checkpoints", []),
        "runner": "benchmarks/run_page.py (the code cells in one Python process, no Jupyter kernel)",
    }
    return records.write(root, page.parent.name, page.stem, page, nbformat.writes(notebook),
                         {**data, "preset": "paper"}, provenance)


if __name__ == "__main__":
    sys.exit(main())
