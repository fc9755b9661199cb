"""How the language server starts: what it imports before its first diagnostics, and its
analysis worker (:mod:`offload_fixer.lsp.worker`) ending with it.

An editor starts the server when a Python file opens and waits for its diagnostics, so the
start path loads the protocol and the static check only: never JAX, nbformat or the fix
machinery. The server is started as ``offload-fixer lsp`` is, spoken to over stdio with the
client's own first messages, and Python's import log (``PYTHONPROFILEIMPORTTIME``, written by
the server and its worker alike) is read. Speed is measured by ``benchmarks/lsp_latency.py
--startup``, never here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli_support import environment
from tests.test_cli_imports import JITTED_WITHOUT_FINDING

NEVER_BEFORE_THE_FIRST_DIAGNOSTICS = (
    "jax",
    "jaxlib",
    "nbformat",
    "offload_fixer.fixes",
    "offload_fixer.codemods",
    "offload_fixer.runner",
    "offload_fixer.analysis",
    "offload_fixer.ir",
    "offload_fixer.xla",
    "offload_fixer.explain",
    "libcst.codemod",
)
WAIT_S = 120
"""Only a guard against a hung server; nothing asserts how fast anything is."""


def send(server: subprocess.Popen, message: dict[str, Any]) -> None:
    assert server.stdin is not None
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    server.stdin.flush()


def receive(server: subprocess.Popen) -> dict[str, Any]:
    assert server.stdout is not None
    length = None
    while (line := server.stdout.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length is not None, "the server closed its output"
    return json.loads(server.stdout.read(length))


def first_diagnostics(server: subprocess.Popen, path: Path) -> dict[str, Any]:
    """What an editor sends first (initialize, initialized, didOpen), then the wait for the
    document's diagnostics; requests from the server are answered with nothing."""
    send(server, {"id": 1, "method": "initialize", "params": {"rootUri": path.parent.as_uri(), "capabilities": {}}})
    while receive(server).get("id") != 1:
        pass
    send(server, {"method": "initialized", "params": {}})
    document = {"uri": path.as_uri(), "languageId": "python", "version": 1, "text": path.read_text()}
    send(server, {"method": "textDocument/didOpen", "params": {"textDocument": document}})
    while (message := receive(server)).get("method") != "textDocument/publishDiagnostics":
        if "id" in message and "method" in message:
            send(server, {"id": message["id"], "result": None})
    return message["params"]


def shut_down(server: subprocess.Popen) -> int:
    send(server, {"id": 2, "method": "shutdown"})
    while receive(server).get("id") != 2:
        pass
    send(server, {"method": "exit"})
    return server.wait(WAIT_S)


def start(tmp_path: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "offload_fixer.lsp"],
        cwd=tmp_path,
        env=environment(**env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr.txt").open("wb"),
    )


def test_the_first_diagnostics_need_neither_jax_nor_the_fix_machinery(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(JITTED_WITHOUT_FINDING)
    server = start(tmp_path, PYTHONPROFILEIMPORTTIME="1")
    try:
        published = first_diagnostics(server, path)
        assert shut_down(server) == 0
    finally:
        server.kill()
    assert published["uri"] == path.as_uri() and published["diagnostics"] == []
    log = [line for line in (tmp_path / "stderr.txt").read_text().splitlines() if line.startswith("import time:")]
    modules = {line.rsplit("|", 1)[1].strip() for line in log[1:]}
    assert {"pygls.lsp.server", "offload_fixer.static.api", "libcst"} <= modules  # the log is of both
    never = sorted(m for m in modules for p in NEVER_BEFORE_THE_FIRST_DIAGNOSTICS if m == p or m.startswith(p + "."))
    assert never == []


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux's ``/proc``)."""
    return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; the worker is forked on Linux only")
@pytest.mark.parametrize("ending", ["exit", "killed"])
def test_the_analysis_worker_ends_with_the_server(tmp_path: Path, ending: str) -> None:
    """After ``exit``, and when the server is killed (the editor crashed): no worker is left behind."""
    path = tmp_path / "step.py"
    path.write_text(JITTED_WITHOUT_FINDING)
    server = start(tmp_path)
    try:
        first_diagnostics(server, path)
        (worker,) = children(server.pid)
        if ending == "exit":
            assert shut_down(server) == 0
    finally:
        server.kill()
        server.wait(WAIT_S)
    deadline = time.monotonic() + WAIT_S
    while _state(worker) not in ("gone", "Z") and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _state(worker) not in ("gone", "Z")
    if left:
        os.kill(worker, signal.SIGKILL)
    assert not left, "the worker outlived the server"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; the worker is forked on Linux only")
def test_a_killed_worker_is_replaced_and_the_next_change_is_analysed(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(JITTED_WITHOUT_FINDING)
    server = start(tmp_path)
    try:
        first_diagnostics(server, path)
        (worker,) = children(server.pid)
        os.kill(worker, signal.SIGKILL)
        published = None
        for version in range(2, 6):  # the analysis running when it died may fail; a later one must not
            change = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}}
            change["text"] = f"# edit {version}\n"
            send(
                server,
                {
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": path.as_uri(), "version": version},
                        "contentChanges": [change],
                    },
                },
            )
            published = _publish_or_log(server)
            if published is not None:
                break
        assert published is not None and published["diagnostics"] == [], "no analysis after the worker died"
        assert [c for c in children(server.pid) if c != worker], "no new worker"
        assert shut_down(server) == 0
    finally:
        server.kill()
        server.wait(WAIT_S)


def _publish_or_log(server: subprocess.Popen) -> dict[str, Any] | None:
    """The next publish, or None when the server logs a failed analysis (an error) first."""
    while True:
        message = receive(server)
        if message.get("method") == "textDocument/publishDiagnostics":
            return message["params"]
        if message.get("method") == "window/logMessage" and message["params"]["type"] == 1:  # an Error
            return None
        if "id" in message and "method" in message:
            send(server, {"id": message["id"], "result": None})
