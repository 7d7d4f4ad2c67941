"""The environment's Jupyter front end: ``.venv/bin/jupyter lab`` starts and opens a page's MyST
source as a notebook (jupytext's contents manager), as the README tells readers to do."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = "notebooks/sparse_recovery/fig02-grokking-mechanism.md"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_jupyter_lab_opens_a_page_source_as_a_notebook(tmp_path: Path) -> None:
    jupyter = Path(sys.executable).parent / "jupyter"
    if not jupyter.is_file():
        pytest.skip("no jupyter in this environment's bin folder")
    port, token = _free_port(), "grokkit-test"
    server = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={ROOT}", "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "w"),
        env={"JUPYTER_RUNTIME_DIR": str(tmp_path), "HOME": str(tmp_path), "PATH": str(jupyter.parent)})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                listing = _get(f"{base}/api/contents/notebooks/sparse_recovery", token)
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.5)
        kinds = {entry["name"]: entry["type"] for entry in listing["content"]}
        assert kinds["fig02-grokking-mechanism.md"] == "notebook"  # listed as a notebook, not a text file
        page = _get(f"{base}/api/contents/{PAGE}", token)
        assert page["type"] == "notebook"
        cells = page["content"]["cells"]
        assert any("parameters" in c["metadata"].get("tags", []) for c in cells)
        assert any(c["cell_type"] == "markdown" and "# Figure 2 — " in c["source"] for c in cells)
    finally:
        server.terminate()
        server.wait(timeout=30)
