"""Language server latency: from ``textDocument/didOpen`` and ``textDocument/didChange`` to
``publishDiagnostics``, for generated modules of 2,000 and 20,000 lines (by default) with a
jitted function every 16 lines (125 and 1,250 of them), each kind of edit an editor makes
typed in its own session (:data:`EDIT_KINDS`): a constant edited in place, a line inserted in
a helper's body in the middle of the module, a line deleted there, a jitted function of 20
lines pasted there, a helper renamed where it is defined and called, a block removed. All
but the first move every statement below them. ``ruff server``, when installed, types the
same versions in the same run (a peer editors already run on every keystroke).

Beside the server, the static check called directly through one ``SourceCache``, as the
server calls it (without the protocol), and how many top-level statements each version
analysed again (:mod:`offload_fixer.static.incremental`: those whose text, callees or read
globals changed, not those that moved); and once, the whole text checked from scratch, as the
CLI does.

The file is a generated module of jitted steps and helpers; ``--finding`` (default) puts one
host ``in_shardings`` error 1200 at the top, which is the costly case (positions are computed
for the statements that findings name). The time is to the first publish of each version, the
one with the findings. The server plans their quick fixes once the document has been still for
``server.PLAN_AFTER_S`` (300 ms) and publishes again; each change here comes ``--pause-ms``
(350) after the publish before it, as a typist's pause, so that it lands while the last
version's fixes are being planned, and a change that supersedes a planning must not wait for
it (:mod:`offload_fixer.lsp.superseding`). The CPU column is the server's and its analysis
worker's per change (Linux's ``/proc``, in clock ticks of 10 ms), planning included. Medians
of ``--changes``.

    .venv/bin/python benchmarks/lsp_latency.py
    .venv/bin/python benchmarks/lsp_latency.py --lines 2000 --changes 20 --edits "insert a line" --pause-ms 0

Target: median at most 50 ms for every edit kind at 2,000 lines / 125 jitted functions;
bounded on 20,000 lines (the open under 2 s, a change under 200 ms).

``--real FILE...``: a real file opened, then typed in (each version one line more edited than
the last, at places spread over the file); its latencies, CPU, and the server's and its
worker's peak memory after the changes.

    .venv/bin/python benchmarks/lsp_latency.py --real ../ext/jax/tests/pjit_test.py --changes 20

``--startup FILE...``: how soon a freshly started server answers, as an editor starts it: the
process spawned, ``initialize``, ``initialized``, ``didOpen`` of each file sent at once, then
the wait for its first ``publishDiagnostics``. Seconds from the spawn to the ``initialize``
answer and to each document's first diagnostics, in fresh processes (median of ``--repeat``),
``ruff server`` beside it. Target: the first diagnostics under 1 s.

    .venv/bin/python benchmarks/lsp_latency.py --startup examples/optimizer_offload_broken.py"""

from __future__ import annotations

import argparse
import ast
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HEAD = '''"""Generated for the language server latency benchmark."""

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
'''
FINDING = """

def scale(x):
    return x * 2


scale_on_host = jax.jit(scale, in_shardings=host)
"""
BLOCK = '''

def helper_{i}(a, b):
    """Plain numerical helper {i}."""
    c = jnp.tanh(a @ b)
    d = c * {i} + 1.0
    e = jnp.square(d)
    return (d + e).sum(axis=0)


@jax.jit
def step_{i}(params, x):
    """Step {i}: one jitted function in 16 lines, 125 in 2,000."""
    y = helper_{i}(params, x)
    z = jnp.maximum(y, 0.0)
    return z, y
'''
PASTED = '''

@jax.jit
def pasted_{k}(x, w):
    """A jitted function of 20 lines, pasted."""
    h = jnp.tanh(x @ w)
    h = h * 2.0 + 1.0
    g = jnp.maximum(h, 0.0)
    g = g / (1.0 + jnp.abs(g))
    s = jnp.sum(g, axis=-1)
    m = jnp.mean(g, axis=-1)
    v = jnp.var(g, axis=-1)
    n = (g - m[..., None]) / jnp.sqrt(v[..., None] + 1e-6)
    o = n @ w.T
    p = jnp.exp(o - o.max())
    q = p / p.sum()
    r = q * s[..., None]
    t = jnp.where(r > 0, r, 0.0)
    u = t.reshape(-1)
    c = jnp.cumsum(u)
    c = c / c[-1]
    return c, s
'''


def generate(lines: int, finding: bool) -> str:
    text = HEAD + (FINDING if finding else "")
    i = 0
    while text.count("\n") < lines:
        text += BLOCK.format(i=i)
        i += 1
    return text


def edited(text: str, change: int) -> str:
    """Version ``change`` of the file: one helper's constant differs."""
    return text.replace("c * 0 + 1.0", f"c * 0 + {change + 2}.0", 1)


EDIT_KINDS = (
    "edit a constant",
    "insert a line",
    "delete a line",
    "paste a 20-line function",
    "rename a function",
    "remove a function",
)


def edit_session(text: str, kind: str, changes: int) -> list[str]:
    """``text`` and ``changes`` versions after it, each one more edit of ``kind`` than the
    last, as typed in the middle of the module (every statement after the edit moves, except
    for the constant, edited in place at the top). A line is inserted in a helper's body,
    a helper's docstring line is deleted, a jitted function of 20 lines is pasted between two
    blocks, a helper is renamed where it is defined and called (an editor's rename), or a
    block (helper and jitted step) is removed."""
    if kind == "edit a constant":
        return [text] + [edited(text, change) for change in range(changes)]
    blocks = text.count("def helper_")
    middle = blocks // 2
    versions = [text]
    for change in range(changes):
        i = (middle + change) % blocks
        if kind == "insert a line":
            anchor = f"    d = c * {middle} + 1.0\n"
            text = text.replace(anchor, f"{anchor}    e{change} = d * {change}.0\n", 1)
        elif kind == "delete a line":
            text = text.replace(f'    """Plain numerical helper {i}."""\n', "", 1)
        elif kind == "paste a 20-line function":
            anchor = f"\n\ndef helper_{i}("
            text = text.replace(anchor, PASTED.format(k=change) + anchor, 1)
        elif kind == "rename a function":
            text = text.replace(f"helper_{i}(", f"renamed_helper_{i}(")
        elif kind == "remove a function":
            text = text.replace(BLOCK.format(i=i), "", 1)
        else:
            raise ValueError(f"unknown edit kind {kind!r}")
        assert text != versions[-1], (kind, change)
        versions.append(text)
    return versions


async def serve_latencies(
    command: list[str],
    path: Path,
    texts: list[str],
    init: dict | None,
    peaks: list[float] | None = None,
    pause: float = 0.0,
) -> tuple[float, list[float], float, list[float]]:
    """Seconds from didOpen to the first publishDiagnostics, and from each didChange to the
    publishDiagnostics of that version; then the CPU seconds the server and its worker used
    meanwhile, which other work on a shared machine inflates less than the wall time
    (``/proc``'s clock ticks: 10 ms). ``peaks``: where the peak resident memory of the
    server and of its worker after the last change (MB, ``/proc``'s ``VmHWM``) is added.
    ``pause``: seconds between a publish and the next change, as a typist leaves them."""
    # Imported here: tests/static use generate() where pygls is not installed.
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("lsp-latency-benchmark", "1")
    arrived: dict[int | None, float] = {}
    waiting: dict[int | None, asyncio.Future] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish(params: types.PublishDiagnosticsParams) -> None:
        arrived[params.version] = time.perf_counter()
        future = waiting.pop(params.version, None)
        if future is not None and not future.done():
            future.set_result(None)

    for name in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE):
        client.feature(name)(lambda params: None)

    await client.start_io(*command, cwd=str(REPO))
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=path.parent.as_uri(), initialization_options=init
        )
    )
    client.initialized(types.InitializedParams())
    uri = path.as_uri()
    loop = asyncio.get_running_loop()
    waiting[1] = loop.create_future()
    cpu_before = _cpu_total(client)
    opened = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, texts[0])))
    await asyncio.wait_for(waiting[1], 3600)
    open_s = arrived[1] - opened
    cpu_after = _cpu_total(client)
    open_cpu = cpu_after - cpu_before
    latencies, change_cpu = [], []
    for version, text in enumerate(texts[1:], start=2):
        if pause:
            await asyncio.sleep(pause)
        waiting[version] = loop.create_future()
        cpu_before = cpu_after
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=version, uri=uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )
        await asyncio.wait_for(waiting[version], 300)
        latencies.append(arrived[version] - sent)
        cpu_after = _cpu_total(client)
        change_cpu.append(cpu_after - cpu_before)
    if peaks is not None:
        peaks.extend(_peak_rss_mb(client))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return open_s, latencies, open_cpu, change_cpu


LARGE_JAX_VERSION = "0.4.26"
"""Rules under which the large documents' returns are findings (from 0.7.1 they are typed host)."""


def large_document(size: int) -> str:
    """A generated module of at least ``size`` characters, one jitted function in twenty
    returning a value it moved to host."""
    parts, total, i = [HEAD], len(HEAD), 0
    while total < size:
        block = (
            f"\n\n@jax.jit\ndef step_{i}(x):\n    h = jax.device_put(x, host)\n    return x * 2, h\n"
            if i % 20 == 0
            else f"\n\ndef helper_{i}(a, b):\n    total = 0\n    for k in range(a):\n        total += k * b\n"
            "    return total\n"
        )
        parts.append(block)
        total += len(block)
        i += 1
    return "".join(parts)


async def open_latency(command: list[str], path: Path, text: str, init: dict | None) -> tuple[float, int, str]:
    """Seconds from ``didOpen`` to the first ``publishDiagnostics``, how many diagnostics it
    carried, and what the server said meanwhile (``showMessage``)."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("lsp-latency-benchmark", "1")
    published: asyncio.Future = asyncio.get_running_loop().create_future()
    shown: list[str] = []

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish(params: types.PublishDiagnosticsParams) -> None:
        if not published.done():
            published.set_result((time.perf_counter(), len(params.diagnostics)))

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show(params: types.ShowMessageParams) -> None:
        shown.append(params.message)

    client.feature(types.WINDOW_LOG_MESSAGE)(lambda params: None)
    await client.start_io(*command, cwd=str(REPO))
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=path.parent.as_uri(), initialization_options=init
        )
    )
    client.initialized(types.InitializedParams())
    sent = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(path.as_uri(), "python", 1, text))
    )
    arrived, count = await asyncio.wait_for(published, 3600)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return arrived - sent, count, " / ".join(shown)


async def startup_latency(command: list[str], path: Path) -> tuple[float, float, tuple[float, float], int]:
    """Seconds from spawning the server to its ``initialize`` answer and to the first
    ``publishDiagnostics`` of ``path`` (opened as soon as ``initialized`` is sent), the CPU
    seconds the server and its worker had used by then, and how many diagnostics that publish carried. The
    bytecode cache may be written, as on a user's machine (``PYTHONDONTWRITEBYTECODE`` dropped)."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("lsp-latency-benchmark", "1")
    published: asyncio.Future = asyncio.get_running_loop().create_future()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish(params: types.PublishDiagnosticsParams) -> None:
        if not published.done():
            published.set_result((time.perf_counter(), _cpu_seconds(client), len(params.diagnostics)))

    for name in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE):
        client.feature(name)(lambda params: None)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    spawned = time.perf_counter()
    await client.start_io(*command, cwd=str(REPO), env=env)
    await client.initialize_async(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=path.parent.as_uri())
    )
    answered = time.perf_counter()
    client.initialized(types.InitializedParams())
    text = path.read_text(encoding="utf-8")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(path.as_uri(), "python", 1, text))
    )
    arrived, cpu, count = await asyncio.wait_for(published, 300)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return answered - spawned, arrived - spawned, cpu, count


def _cpu_seconds(client) -> tuple[float, float]:
    """User and system CPU seconds of the client's server process, and of its children (the
    analysis worker), so far, from Linux's ``/proc``."""

    def ticks(pid: int) -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def children(pid: int) -> list[int]:
        return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]

    server = client._server.pid
    pending, below = children(server), 0
    while pending:
        pid = pending.pop()
        below += ticks(pid)
        pending += children(pid)
    tick = os.sysconf("SC_CLK_TCK")
    return ticks(server) / tick, below / tick


def _peak_rss_mb(client) -> list[float]:
    """Peak resident memory, MB, of the client's server process and of each process below it."""

    def peak(pid: int) -> float:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def children(pid: int) -> list[int]:
        return [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]

    try:
        server = client._server.pid
        return [peak(server), *(peak(pid) for pid in children(server))]
    except OSError:
        return []


def _cpu_total(client) -> float:
    """CPU seconds of the server and its children so far; NaN where there is no ``/proc``."""
    try:
        return sum(_cpu_seconds(client))
    except OSError:
        return float("nan")


def startup(paths: list[Path], repeat: int, skip_ruff: bool) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    servers = [("offload-fixer lsp", [sys.executable, "-m", "offload_fixer.lsp"])]
    if not skip_ruff and Path(ruff).exists():
        servers.append(("ruff server", [ruff, "server"]))
    print(
        f"{'server':18} {'document':30} {'initialize s':>12} {'first diagnostics s':>19} {'min s':>6} "
        f"{'CPU s: server':>13} {'worker':>6} {'count':>5}"
    )
    for path in paths:
        for name, command in servers:
            asyncio.run(startup_latency(command, path.resolve()))  # warms the bytecode and OS caches
            runs = [asyncio.run(startup_latency(command, path.resolve())) for _ in range(repeat)]
            first = [r[1] for r in runs]
            print(
                f"{name:18} {path.name:30} {statistics.median(r[0] for r in runs):12.3f} "
                f"{statistics.median(first):19.3f} {min(first):6.3f} {statistics.median(r[2][0] for r in runs):13.3f} "
                f"{statistics.median(r[2][1] for r in runs):6.3f} {runs[0][3]:5}",
                flush=True,
            )
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def check_command_seconds(path: Path) -> float:
    """Wall time of ``offload-fixer check FILE`` (the installed command, in a fresh process)."""
    import subprocess

    start = time.perf_counter()
    subprocess.run(
        [
            str(Path(sys.executable).with_name("offload-fixer")),
            "check",
            "-q",
            "--exit-zero",
            "--jax-version",
            LARGE_JAX_VERSION,
            str(path),
        ],
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=3600,
    )
    return time.perf_counter() - start


def large_documents(sizes: list[int], skip_ruff: bool) -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    print(f"{'characters':>12} {'lsp s':>8} {'answer':>28} {'check s':>8} {'ruff server s':>14} {'lsp / ruff':>10}")
    for size in sizes:
        text = large_document(size)
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "large.py"
            path.write_text(text, encoding="utf-8")
            took, count, shown = asyncio.run(
                open_latency([sys.executable, "-m", "offload_fixer.lsp"], path, text, {"jaxVersion": LARGE_JAX_VERSION})
            )
            answer = "refused (message shown)" if shown else f"{count} diagnostics"
            check = check_command_seconds(path)
            peer = None
            if not skip_ruff and Path(ruff).exists():
                peer = asyncio.run(open_latency([ruff, "server"], path, text, None))[0]
        ratio = f"{took / peer:10.1f}" if peer else f"{'-':>10}"
        peer_text = f"{peer:14.2f}" if peer else f"{'-':>14}"
        print(f"{len(text):12,} {took:8.2f} {answer:>28} {check:8.2f} {peer_text} {ratio}")


def direct_latencies(path: Path, texts: list[str], cached: bool, analysed: list[int] | None = None) -> list[float]:
    """Seconds of the static check of each text after the first, called in-process; with
    ``cached``, through one ``SourceCache`` as the server does, and ``analysed`` is given how
    many top-level statements each version analysed again."""
    from offload_fixer.static import SourceCache, check_source
    from offload_fixer.static.project import Project

    cache, project = (SourceCache(), Project()) if cached else (None, None)
    check_source(texts[0], str(path), cache=cache, project=project)
    out = []
    for text in texts[1:]:
        start = time.perf_counter()
        check_source(text, str(path), cache=cache, project=project)
        out.append(time.perf_counter() - start)
        if analysed is not None and cache is not None and cache.analysis is not None:
            analysed.append(len(cache.analysis.reanalysed))
    return out


def typed_versions(text: str, changes: int) -> list[str]:
    """``text`` and ``changes`` versions after it, each one more line edited than the last (a
    comment typed after an assignment), at places spread over the file: every version differs
    from the one before in one place, as an editor's do."""
    lines = text.splitlines(keepends=True)
    places = [number for number, line in enumerate(lines) if _ASSIGNMENT.match(line)]
    versions = [text]
    for change in range(changes):
        for number in places[change * len(places) // max(changes, 1) :]:
            edited_lines = lines[:]
            edited_lines[number] = edited_lines[number].rstrip("\r\n") + f"  # typed {change}\n"
            candidate = "".join(edited_lines)
            try:
                ast.parse(candidate)
            except SyntaxError:
                continue
            lines = edited_lines
            versions.append(candidate)
            break
    return versions


_ASSIGNMENT = re.compile(r"[ \t]+\w+ = \S.*[^\\\s]\r?\n")
"""An indented assignment whose line ends without a continuation."""


def real_rows(path: Path, args: argparse.Namespace, init: dict | None) -> None:
    """The latencies of a real file: its open, then edits spread over it (``typed_versions``)."""
    base = path.read_text(encoding="utf-8")
    texts = typed_versions(base, args.changes)
    print(f"{path}: {base.count(chr(10))} lines, {len(base.encode())} bytes, {len(texts) - 1} changes", flush=True)
    rows = [("static check, SourceCache (as the server)", direct_latencies(path, texts, cached=True))]
    peaks: list[float] = []
    opened, server, open_cpu, change_cpu = asyncio.run(
        serve_latencies([sys.executable, "-m", "offload_fixer.lsp"], path, texts, init, peaks)
    )
    rows += [("offload-fixer lsp, didOpen -> publish", [opened]), ("offload-fixer lsp, didChange -> publish", server)]
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not args.skip_ruff and Path(ruff).exists():
        peer_open, peer, _, _ = asyncio.run(serve_latencies([ruff, "server"], path, texts, None))
        rows += [("ruff server, didOpen -> publish", [peer_open]), ("ruff server, didChange -> publish", peer)]
    print(f"{'':44} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    for name, values in rows:
        print(f"{name:44} {statistics.median(values) * 1e3:10.1f} {min(values) * 1e3:8.1f} {max(values) * 1e3:8.1f}")
    print(
        f"CPU of the server and its worker: open {open_cpu * 1e3:.0f} ms, "
        f"change median {statistics.median(change_cpu) * 1e3:.0f} ms; "
        f"peak memory after the changes: {' + '.join(f'{mb:.0f}' for mb in peaks) or '-'} MB (server + worker)\n",
        flush=True,
    )


def size_rows(lines: int, args: argparse.Namespace, init: dict | None) -> None:
    """The open, then each edit kind (:data:`EDIT_KINDS`) in a session of its own, in the
    server and in ``ruff server`` one after the other, ``--pause-ms`` between a publish and
    the next change; beside them the direct check through a ``SourceCache`` and how many
    top-level statements it analysed again per version."""
    base = generate(lines, args.finding)
    jitted = base.count("@jax.jit")
    pause = args.pause_ms / 1e3
    print(
        f"{base.count(chr(10))} lines, {len(base.encode())} bytes, {jitted} jitted functions, "
        f"finding: {args.finding}, {args.changes} changes per kind, {args.pause_ms} ms between a publish "
        "and the next change",
        flush=True,
    )
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    with_ruff = not args.skip_ruff and Path(ruff).exists()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "generated.py"
        path.write_text(base, encoding="utf-8")
        whole = direct_latencies(path, [base] + [edited(base, i) for i in range(3)], cached=False)
        print(
            f"static check of the whole text (as the CLI): {statistics.median(whole) * 1e3:.0f} ms, "
            f"{statistics.median(whole) / jitted * 1e3:.2f} ms per jitted function"
        )
        header = (
            f"{'edit':26} {'direct ms':>9} {'analysed':>8} {'lsp ms':>7} {'min':>6} {'max':>7} {'CPU ms':>6} "
            f"{'ruff ms':>7} {'lsp/ruff':>8}"
        )
        print(header)
        opens: list[tuple[float, float]] = []
        for kind in args.edits:
            texts = edit_session(base, kind, args.changes)
            analysed: list[int] = []
            direct = direct_latencies(path, texts, cached=True, analysed=analysed)
            opened, server, _, change_cpu = asyncio.run(
                serve_latencies([sys.executable, "-m", "offload_fixer.lsp"], path, texts, init, pause=pause)
            )
            peer = asyncio.run(serve_latencies([ruff, "server"], path, texts, None, pause=pause)) if with_ruff else None
            opens.append((opened, peer[0] if peer else float("nan")))
            median = statistics.median(server)
            peer_text = (
                f"{statistics.median(peer[1]) * 1e3:7.1f} {median / statistics.median(peer[1]):8.1f}"
                if peer
                else f"{'-':>7} {'-':>8}"
            )
            print(
                f"{kind:26} {statistics.median(direct) * 1e3:9.1f} {statistics.median(analysed):8.0f} "
                f"{median * 1e3:7.1f} {min(server) * 1e3:6.1f} {max(server) * 1e3:7.1f} "
                f"{statistics.median(change_cpu) * 1e3:6.0f} {peer_text}",
                flush=True,
            )
    print(
        f"didOpen -> publish, median of the sessions: offload-fixer lsp "
        f"{statistics.median(o for o, _ in opens) * 1e3:.0f} ms, ruff server "
        f"{statistics.median(p for _, p in opens) * 1e3:.0f} ms; load average {os.getloadavg()[0]:.1f}\n",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument(
        "--edits",
        nargs="+",
        choices=EDIT_KINDS,
        default=list(EDIT_KINDS),
        metavar="KIND",
        help=f"the edit kinds typed in the generated modules (default: all of {', '.join(EDIT_KINDS)})",
    )
    parser.add_argument(
        "--pause-ms",
        type=int,
        default=350,
        help="between a publish and the next change (default 350: the change comes while the server plans the "
        "last version's quick fixes, which it starts 300 ms after a publish)",
    )
    parser.add_argument("--finding", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--debounce-ms", type=int, default=None, help="server debounce (default: its own)")
    parser.add_argument("--skip-ruff", action="store_true")
    parser.add_argument(
        "--large",
        type=int,
        nargs="+",
        metavar="CHARS",
        help="time the answer to didOpen for documents of these sizes instead",
    )
    parser.add_argument(
        "--startup", type=Path, nargs="+", metavar="FILE", help="time a fresh server's first diagnostics instead"
    )
    parser.add_argument("--repeat", type=int, default=5, help="fresh servers per document with --startup")
    parser.add_argument(
        "--real",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="open these files and type in them instead (the files are not written)",
    )
    args = parser.parse_args()
    init = None if args.debounce_ms is None else {"debounceMs": args.debounce_ms}
    if args.real:
        for path in args.real:
            real_rows(path.resolve(), args, init)
        return
    if args.startup:
        startup(args.startup, args.repeat, args.skip_ruff)
        return
    if args.large:
        large_documents(args.large, args.skip_ruff)
        return

    for lines in args.lines:
        size_rows(lines, args, init)


if __name__ == "__main__":
    main()
