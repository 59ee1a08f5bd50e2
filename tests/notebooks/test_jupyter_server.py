"""The Jupyter user's path, not papermill's: a headless Jupyter server opens a chapter's MyST text
notebook through jupytext's contents manager, a kernel of this environment executes it cell by
cell over the server's websocket, at the smoke preset set in the parameters cell as a reader would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from paperlib.core import params as P

PAPER = "manifold-lsh"          # the quickest chapter at smoke
# run_seconds: a whole chapter executed cell by cell, ordered among the chapter runs (tests/conftest.py)
pytestmark = [pytest.mark.notebook, pytest.mark.check, pytest.mark.paper(PAPER), pytest.mark.run_seconds(40.0)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyter_server(tmp_path):
    """A server on a free port whose root holds a copy of the chapter (so that the run's ledger is
    written there, not into notebooks/)."""
    shutil.copy(P.REPO_ROOT / "notebooks" / f"{PAPER}.md", tmp_path / f"{PAPER}.md")
    port, token = free_port(), uuid.uuid4().hex
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--ServerApp.root_dir={tmp_path}", f"--IdentityProvider.token={token}", "--allow-root"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        env=dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime")))
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                api(base, token, "/api/status")
                break
            except OSError:
                if process.poll() is not None:
                    pytest.fail("jupyter server exited:\n" + process.stdout.read())
                time.sleep(0.1)
        else:
            pytest.fail("jupyter server did not answer within 30 s")
        yield base, token, tmp_path
    finally:
        process.terminate()
        process.wait(timeout=30)


def api(base, token, path, method="GET", body=None):
    request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read() or b"null")


def with_smoke_preset(source: str) -> str:
    """The parameters cell with the reader's one edit: preset "smoke"."""
    lines = source.splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith("preset =")]
    assert len(hits) == 1, "the parameters cell should set `preset` on one line"
    lines[hits[0]] = 'preset = "smoke"'
    return "\n".join(lines)


async def execute(base, token, kernel_id, sources, timeout_s=240):
    """Run each source on the kernel over the server's websocket; the outputs per cell."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect
    url = base.replace("http", "ws") + f"/api/kernels/{kernel_id}/channels"
    connection = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
    session, results = uuid.uuid4().hex, []
    for source in sources:
        msg_id = uuid.uuid4().hex
        await connection.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "session": session, "username": "test",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": source, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        outputs, status, idle = [], None, False
        deadline = time.monotonic() + timeout_s
        while not (idle and status):
            raw = await asyncio.wait_for(connection.read_message(), deadline - time.monotonic())
            message = json.loads(raw)
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = message["header"]["msg_type"]
            if kind == "execute_reply":
                status = message["content"]["status"]
            elif kind == "status" and message["content"]["execution_state"] == "idle":
                idle = True
            elif kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append(message["content"] | {"output_type": kind})
        results.append((status, outputs))
        if status != "ok":
            break
    connection.close()
    return results


def test_a_chapter_opens_through_jupytext_and_runs_at_smoke_on_this_kernel(jupyter_server):
    base, token, root = jupyter_server
    model = api(base, token, f"/api/contents/{PAPER}.md?type=notebook&content=1")
    assert model["type"] == "notebook", "jupytext's contents manager did not open the .md as a notebook"
    cells = [c for c in model["content"]["cells"] if c["cell_type"] == "code"]
    parameters = [i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", [])]
    assert len(parameters) == 1, "one cell tagged `parameters`"
    sources = [c["source"] for c in cells]
    sources[parameters[0]] = with_smoke_preset(sources[parameters[0]])
    kernel = api(base, token, "/api/kernels", "POST", {"name": "python3", "path": f"{PAPER}.md"})
    try:
        results = asyncio.run(execute(base, token, kernel["id"], sources))
    finally:
        api(base, token, f"/api/kernels/{kernel['id']}", "DELETE")
    failed = [(i, out) for i, (status, out) in enumerate(results) if status != "ok"]
    assert not failed, f"cell {failed[0][0]} failed: " + json.dumps([o for o in failed[0][1] if o["output_type"] == "error"])[:2000]
    assert len(results) == len(sources)
    text = json.dumps([out for _, out in results])
    assert "Reproduce this page" in text and "preset `smoke`" in text
    ledger = json.loads((root / f"{PAPER}.smoke.ledger.json").read_text())
    assert ledger["preset"] == "smoke" and ledger["claims"]
    # the same claims, and verdicts, as the committed smoke reference that papermill produced
    reference = json.loads((P.REPO_ROOT / "tests" / "references" / f"{PAPER}.json").read_text())
    assert {c["id"]: c["verdict"] for c in ledger["claims"]} == {c["id"]: c["verdict"] for c in reference["claims"]}
