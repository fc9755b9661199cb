"""Language server latency: from ``textDocument/didOpen`` and ``textDocument/didChange`` to
``publishDiagnostics``, for generated modules of 2,000 and 20,000 lines (by default) with a
jitted function every 14 lines (142 and 1,428 of them), beside the static check called directly
on the same texts (the work every analysis does, without the protocol or the debounce) and,
when installed, ``ruff server`` on the same edits in the same run (a peer editors already run
on every keystroke).

The direct check runs twice: as the CLI does (each text checked from scratch, timed on
three changes), and as the server does (through one ``SourceCache``, so a change re-analyses
only the statements that read what it binds, :mod:`offload_fixer.static.incremental`). Both
read the text statement by statement and parse with libcst only what a host value can reach
(:mod:`offload_fixer.static.candidates`).
The server also freezes its long-lived heap after its first analysis (``gc.freeze``), so it
can beat the direct calls, which run with the collector's defaults.

The file is a generated module of jitted steps and helpers; ``--finding`` (default) puts one
host ``in_shardings`` error 1200 at the top, which is the costly case (positions are computed
for the statements that findings name). The time is to the first publish of each version, the
one with the findings: the server plans their quick fixes once the document has been still for
``server.PLAN_AFTER_S`` and publishes again, and each change here comes sooner, as typing does,
so that planning is cancelled. A change that finds the analysis idle is analysed at once: the
debounce waits only in a burst of changes that outpaces it (``settings.wait_before``). Each change edits one helper's constant, so every version is new
text (no analysis cache hit) and the finding stays. Median of ``--changes``. A second table
gives the CPU time the server and its analysis worker spent on the same open and changes
(Linux's ``/proc``, in clock ticks of 10 ms): other work on a shared machine inflates it far
less than the wall time.

    .venv/bin/python benchmarks/lsp_latency.py
    .venv/bin/python benchmarks/lsp_latency.py --lines 2000 --changes 20 --no-finding

Target: median under 50 ms for a change to 2,000 lines; bounded on 20,000 lines (the open
under 2 s, a change under 200 ms).

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
    return d.sum(axis=0)


@jax.jit
def step_{i}(params, x):
    y = helper_{i}(params, x)
    z = jnp.maximum(y, 0.0)
    return z, y
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


async def serve_latencies(
    command: list[str], path: Path, texts: list[str], init: dict | None, peaks: list[float] | None = None
) -> tuple[float, list[float], float, list[float]]:
    """Seconds from didOpen to the first publishDiagnostics, and from each didChange to the
    publishDiagnostics of that version; then the CPU seconds the server and its worker used
    meanwhile, which other work on a shared machine inflates less than the wall time
    (``/proc``'s clock ticks: 10 ms). ``peaks``: where the peak resident memory of the
    server and of its worker after the last change (MB, ``/proc``'s ``VmHWM``) is added."""
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


def direct_latencies(path: Path, texts: list[str], cached: bool) -> list[float]:
    from offload_fixer.static import SourceCache, check_source
    from offload_fixer.static.project import Project

    cache, project = (SourceCache(), Project()) if cached else (None, None)
    check_source(texts[0], str(path), cache=cache, project=project)
    out = []
    for text in texts[1:]:
        start = time.perf_counter()
        check_source(text, str(path), cache=cache, project=project)
        out.append(time.perf_counter() - start)
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


def size_rows(lines: int, args: argparse.Namespace, init: dict | None) -> list[tuple[str, list[float]]]:
    base = generate(lines, args.finding)
    texts = [base] + [edited(base, i) for i in range(args.changes)]
    jitted = base.count("@jax.jit")
    print(
        f"{base.count(chr(10))} lines, {len(base.encode())} bytes, {jitted} jitted functions, "
        f"finding: {args.finding}, {args.changes} changes",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "generated.py"
        path.write_text(base, encoding="utf-8")
        rows = [
            ("static check, whole text (CLI), 3 changes", direct_latencies(path, texts[:4], cached=False)),
            ("static check, SourceCache (as the server)", direct_latencies(path, texts, cached=True)),
        ]
        opened, server, open_cpu, change_cpu = asyncio.run(
            serve_latencies([sys.executable, "-m", "offload_fixer.lsp"], path, texts, init)
        )
        rows += [
            ("offload-fixer lsp, didOpen -> publish", [opened]),
            ("offload-fixer lsp, didChange -> publish", server),
        ]
        cpu_rows = [
            ("offload-fixer lsp, didOpen -> publish", [open_cpu]),
            ("offload-fixer lsp, didChange -> publish", change_cpu),
        ]
        ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
        if not args.skip_ruff and Path(ruff).exists():
            peer_open, peer, peer_open_cpu, peer_cpu = asyncio.run(serve_latencies([ruff, "server"], path, texts, None))
            rows += [("ruff server, didOpen -> publish", [peer_open]), ("ruff server, didChange -> publish", peer)]
            cpu_rows += [
                ("ruff server, didOpen -> publish", [peer_open_cpu]),
                ("ruff server, didChange -> publish", peer_cpu),
            ]
    print(f"{'':44} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    for name, values in rows:
        print(f"{name:44} {statistics.median(values) * 1e3:10.1f} {min(values) * 1e3:8.1f} {max(values) * 1e3:8.1f}")
    print(f"{'CPU of the server and its worker':44} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    for name, values in cpu_rows:
        print(f"{name:44} {statistics.median(values) * 1e3:10.0f} {min(values) * 1e3:8.0f} {max(values) * 1e3:8.0f}")
    floor = statistics.median(rows[1][1])
    print(
        f"server / direct check with a SourceCache: {statistics.median(server) / floor:.2f}x "
        "(the server adds its debounce and JSON-RPC, and saves the garbage collector's full scans)"
    )
    if len(rows) > 4:
        print(
            f"change, offload-fixer lsp / ruff server: {statistics.median(server) / statistics.median(rows[5][1]):.1f}x"
        )
    per_function = statistics.median(rows[0][1]) / jitted * 1e3
    print(f"whole-text check per jitted function: {per_function:.2f} ms\n", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--changes", type=int, default=20)
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
