"""Records of the paper's own scale: what ``grokkit run PAGE --preset paper --record`` keeps of a
page's run in ``book/paper_runs/<chapter>/``, and what the book reads back.

A record is small and self-describing:

* ``<stem>.json``: the page's report (parameters, measured numbers, claims, disagreements), its
  provenance (commit, machine, versions, start, wall time, compute, cached runs), the SHA-256 of
  the page's source, of the page's code cells (what ran: :func:`page_code`) and of the grokkit code
  its runs depend on, and its files with their SHA-256;
* ``<stem>.ipynb``: the executed notebook, its images replaced by the names of the files below;
* ``<stem>-<k>.png``: its figures, as the page drew them.

A failed claim is a finding, recorded like a passing one. The book refuses a record that does
not match its page (another page's, a missing or altered file: :func:`problems`) and shows a
record whose page's code or grokkit code changed since it ran as stale, with what changed
(:func:`stale`). Editing a page's prose (its discussion of the record) leaves the record current.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import importlib
import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

RECORDS = Path("book") / "paper_runs"
# Where a recorded run checkpoints (unless $GROKKIT_CHECKPOINTS says otherwise): committed, an
# unfinished paper-preset run goes on from there in another checkout, on another day or machine.
CHECKPOINTS = RECORDS / "checkpoints"
FORMAT = 1
# Paths a record run may leave modified: the records themselves.
RECORD_PATHS = (RECORDS.as_posix() + "/",)


class RecordError(ValueError):
    """A record that cannot be read or does not match its page."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def paths(root: Path, chapter: str, stem: str) -> dict[str, Path]:
    """The record's summary and executed notebook; figures are ``<stem>-<k>.png`` beside them."""
    folder = root / RECORDS / chapter
    return {"folder": folder, "summary": folder / f"{stem}.json", "notebook": folder / f"{stem}.ipynb"}


# ----------------------------------------------------------------------------- provenance


def dirty_files(root: Path) -> list[str]:
    """Tracked files with uncommitted changes, outside ``book/paper_runs/`` (None-safe: [] without git)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                             check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    files = [line[3:].split(" -> ")[-1] for line in out.splitlines() if line.strip()]
    return [f for f in files if not f.startswith(RECORD_PATHS)]


def commit(root: Path) -> str:
    """``git rev-parse HEAD``, or "unknown" outside a git checkout."""
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> dict[str, Any]:
    """The machine a page ran on, as the worker that ran it sees it: host, CPU model and vector
    extensions, the cores the process may use, the GPU and its driver where torch sees one, the
    BLAS libraries with their thread counts, and the versions of the numerical stack."""
    import numpy
    import torch

    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    info: dict[str, Any] = {
        "host": socket.gethostname(), "cpu": cpu, "cores": cores,
        "vector_extensions": sorted(flags & {"avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl", "neon"}),
        "torch_threads": torch.get_num_threads(),
        "thread_variables": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")
                             if k in os.environ},
        "versions": {"python": platform.python_version(), "numpy": numpy.__version__, "torch": torch.__version__},
    }
    try:
        from threadpoolctl import threadpool_info

        info["blas"] = [{k: pool.get(k) for k in ("internal_api", "version", "num_threads", "threading_layer")}
                        for pool in threadpool_info()]
    except ImportError:
        info["blas"] = []
    if torch.cuda.is_available():
        info["gpu"] = {"name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(),
                       "cuda": torch.version.cuda, "driver": _nvidia_driver()}
        try:
            import triton

            info["versions"]["triton"] = triton.__version__
        except ImportError:
            pass
    return info


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             check=True, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def lock_sha256(root: Path) -> str | None:
    """SHA-256 of ``requirements-lock.txt`` (the pinned environment), None without one."""
    path = root / "requirements-lock.txt"
    return _sha256(path.read_bytes()) if path.is_file() else None


# ----------------------------------------------------------------------------- the code a page depends on


def _resolve(name: str) -> Any:
    """The object ``module.qualname`` names (``grokkit.kernels.sparse.run_grid``), or None."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
        return obj
    return None


def _file(name: str) -> str | None:
    """The SHA-256 (16 hex digits) of the C source ``file:NAME`` of grokkit's kernels, None if it is gone."""
    path = Path(__file__).parent / "kernels" / name.removeprefix("file:")
    return _sha256(path.read_bytes())[:16] if path.is_file() else None


def _generated(name: str) -> bool:
    """Whether a recorded name is a function that :mod:`dataclasses` generated (recorded by an earlier
    grokkit): no source of its own, so a record is never stale against it."""
    from grokkit import checkpoint

    return "<locals>" in name and "__create_fn__" in name or checkpoint.generated(_resolve(name))


def code(kernels: list[str]) -> dict[str, str]:
    """The SHA-256 (16 hex digits) of each grokkit function and class the page's cached runs
    (``kernels``, by qualified name) depend on (:func:`grokkit.checkpoint.sources`), and of the C
    source of the fused steps among them (their ``source``): what a record is stale against."""
    from grokkit import checkpoint

    objects = [obj for obj in map(_resolve, kernels) if obj is not None]
    found = checkpoint.sources(objects)
    for name in list(found):
        source = getattr(_resolve(name), "source", None)
        if isinstance(source, Path) and source.suffix == ".c":
            found[f"file:{source.name}"] = _file(source.name)
    return dict(sorted(found.items()))


def page_code(source: Path) -> str:
    """The SHA-256 of a page's code cells, in order: what its run computed and checked. Its prose
    is left out, so that a page's discussion can follow its record without making it stale."""
    import jupytext

    nb = jupytext.read(source)
    cells = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    return _sha256(json.dumps(cells).encode())


# ----------------------------------------------------------------------------- writing


def _figures(nb: Any, stem: str) -> tuple[Any, list[tuple[str, bytes, str]]]:
    """The notebook with its PNG outputs replaced by the names of their files, and the figures
    (file name, PNG bytes, caption)."""
    nb = copy.deepcopy(nb)
    figures = []
    for cell in nb.cells:
        caption = (((cell.get("metadata") or {}).get("mystnb") or {}).get("figure") or {}).get("caption", "")
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            if "image/png" in data:
                name = f"{stem}-{len(figures) + 1}.png"
                figures.append((name, base64.b64decode(data["image/png"]), " ".join(str(caption).split())))
                output["data"] = {"text/plain": f"[figure: {name}]"}
    return nb, figures


def write(root: Path, chapter: str, stem: str, source: Path, notebook_text: str, summary: dict[str, Any],
          provenance: dict[str, Any]) -> Path:
    """Write the record of one paper-preset run: its figures, its notebook, then its summary
    (each through a temporary file renamed into place, the summary last); return the summary's path."""
    import nbformat

    from grokkit.pipeline import atomic_write

    where = paths(root, chapter, stem)
    where["folder"].mkdir(parents=True, exist_ok=True)
    nb, figures = _figures(nbformat.reads(notebook_text, as_version=4), stem)
    for old in where["folder"].glob(f"{stem}-*.png"):
        old.unlink()
    files = []
    for name, png, caption in figures:
        partial = where["folder"] / f".{name}.partial"
        partial.write_bytes(png)
        os.replace(partial, where["folder"] / name)
        files.append({"file": name, "sha256": _sha256(png), "caption": caption})
    text = nbformat.writes(nb) + "\n"
    atomic_write(where["notebook"], text)
    kernels = sorted(set(summary.get("kernels", [])))
    record = {
        "format": FORMAT, "notebook": stem, "chapter": chapter, "preset": summary.get("preset", "paper"),
        "source": source.relative_to(root).as_posix(), "source_sha256": _sha256(source.read_bytes()),
        "code_sha256": page_code(source),
        "parameters": summary.get("parameters", {}), "measured": summary.get("measured", {}),
        "claims": summary.get("claims", []), "disagreements": summary.get("disagreements", []),
        "code": code(kernels), "provenance": provenance,
        "files": {"notebook": {"file": where["notebook"].name, "sha256": _sha256(text.encode())},
                  "figures": files},
    }
    atomic_write(where["summary"], json.dumps(record, indent=1, allow_nan=False) + "\n")
    return where["summary"]


# ----------------------------------------------------------------------------- reading


def read(root: Path, chapter: str, stem: str) -> dict[str, Any] | None:
    """The record of a page, None where it has none; :class:`RecordError` where it is unreadable."""
    path = paths(root, chapter, stem)["summary"]
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise RecordError(f"{path.relative_to(root)} is not a readable record ({err})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path.relative_to(root)} is not a record (a JSON object)")
    return data


def problems(root: Path, chapter: str, stem: str, data: dict[str, Any]) -> list[str]:
    """Why a record does not match its page: another page's record, another format, a missing or
    altered file. The book fails on these, never on a record's verdict."""
    name = paths(root, chapter, stem)["summary"].relative_to(root).as_posix()
    if data.get("notebook") != stem or data.get("chapter") != chapter:
        return [f"{name} records {data.get('chapter')}/{data.get('notebook')}, not {chapter}/{stem}"]
    if data.get("format") != FORMAT:
        return [f"{name} has format {data.get('format')!r}; this grokkit reads format {FORMAT}"]
    found = []
    folder = paths(root, chapter, stem)["folder"]
    files = data.get("files") or {}
    # A record converted from an earlier format may lack the executed notebook (its provenance says so).
    notebook = files.get("notebook") or ({} if "converted_from" not in (data.get("provenance") or {}) else None)
    for entry in [*([notebook] if notebook is not None else []), *(files.get("figures") or [])]:
        path = folder / str(entry.get("file", ""))
        if not entry.get("file") or not path.is_file():
            found.append(f"{name}: its file {entry.get('file')!r} is missing")
        elif _sha256(path.read_bytes()) != entry.get("sha256"):
            found.append(f"{name}: its file {entry['file']} does not match the SHA-256 it records")
    for key in ("claims", "disagreements", "provenance", "source_sha256", "code"):
        if key not in data:
            found.append(f"{name} lacks {key!r}")
    return found


def stale(root: Path, data: dict[str, Any]) -> list[str]:
    """What changed since the record ran: the page's code cells (its whole source, for a record
    that predates ``code_sha256``), or grokkit code its runs depend on (each function or class by
    name). Empty for a record that is current."""
    reasons = []
    source = root / str(data.get("source", ""))
    if not source.is_file():
        reasons.append(f"its page {data.get('source')} no longer exists")
    elif data.get("source_sha256") is None:
        reasons.append("the page it ran is not known (a record converted from an earlier format)")
    elif "code_sha256" in data:
        if page_code(source) != data["code_sha256"]:
            reasons.append(f"the page's code ({data.get('source')}) was edited")
    elif _sha256(source.read_bytes()) != data.get("source_sha256"):  # a record from before code_sha256
        reasons.append(f"the page ({data.get('source')}) was edited")
    recorded = {name: digest for name, digest in (data.get("code") or {}).items() if not _generated(name)}
    kernels = [name for name in recorded if not name.startswith("file:")]
    now = {**code(kernels), **{name: _file(name) for name in recorded if name.startswith("file:")}}
    changed = sorted(name for name, digest in recorded.items() if now.get(name) != digest)
    if changed:
        shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
        reasons.append(f"the code its runs depend on changed: {shown}")
    return reasons


def verdict(data: dict[str, Any]) -> dict[str, Any]:
    """The paper's claims passed and failed, the set-up checks broken and the disagreements of a record."""
    claims = [c for c in data.get("claims", []) if c.get("kind", "claim") == "claim"]
    setup = [c for c in data.get("claims", []) if c.get("kind", "claim") != "claim"]
    return {"passed": sum(bool(c.get("pass")) for c in claims), "total": len(claims),
            "setup_broken": sum(not c.get("pass") for c in setup),
            "disagreements": len(data.get("disagreements", []))}
