"""The language server's base protocol, as a hostile or broken client speaks it: raw bytes over
stdio, so that malformed frames can be sent at all. Each scenario says what the server must
answer and how it must end; none may hang, none may leave the server wedged."""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "offload_fixer.lsp"]
WAIT_S = 60.0
"""Only a guard: an answer later than this counts as a hang."""

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
SERVER_NOT_INITIALIZED = -32002


def frame(message: dict | list | None = None, raw: bytes | None = None) -> bytes:
    body = raw if raw is not None else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def request(id_: int, method: str, params: object = None) -> bytes:
    message = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return frame(message)


def notification(method: str, params: object = None) -> bytes:
    message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return frame(message)


def initialize(options: object = None, root: Path | None = None) -> bytes:
    params = {"processId": None, "capabilities": {}, "rootUri": root.as_uri() if root else None}
    if options is not None:
        params["initializationOptions"] = options
    return request(1, "initialize", params)


class RawServer:
    """``offload-fixer lsp`` in a process, spoken to in bytes."""

    def __init__(self, cwd: Path) -> None:
        env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "TPU_SKIP_MDS_QUERY": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.process = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env
        )
        self.buffer = b""
        self.received: list[dict] = []

    def send(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def close_input(self) -> None:
        self.process.stdin.close()

    def next_message(self, timeout: float = WAIT_S) -> dict | None:
        deadline = time.monotonic() + timeout
        while True:
            message = self._parse()
            if message is not None:
                self.received.append(message)
                return message
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk

    def wait_for(self, wanted: Callable[[dict], bool], timeout: float = WAIT_S) -> dict | None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            message = self.next_message(left)
            if message is None:
                return None
            if wanted(message):
                return message
        return None

    def answer_to(self, id_: object, timeout: float = WAIT_S) -> dict | None:
        return self.wait_for(lambda m: m.get("id") == id_ and ("result" in m or "error" in m), timeout)

    def status(self, timeout: float = WAIT_S) -> int | None:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> bytes:
        """End the process; returns what it wrote to stderr."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        errors = self.process.stderr.read() or b""
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass
        return errors

    def _parse(self) -> dict | None:
        head, sep, rest = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            return None
        length = next(
            int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
        )
        if len(rest) < length:
            return None
        self.buffer = rest[length:]
        return json.loads(rest[:length])


def error_code(message: dict | None) -> int | None:
    return (message or {}).get("error", {}).get("code")


# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[RawServer, Path], str | None]
    """Drives the server; returns what went wrong, or None."""


def _then_alive(server: RawServer, _root: Path | None = None) -> str | None:
    """The server still answers a well-formed request after what came before."""
    server.send(request(99, "shutdown"))
    answer = server.answer_to(99)
    return None if answer is not None and "result" in answer else f"no answer to a valid request afterwards: {answer}"


def _expect(server: RawServer, wanted_code: int, id_: object = None) -> str | None:
    answer = server.wait_for(lambda m: "error" in m)
    if answer is None:
        return f"no error answer (expected {wanted_code})"
    if error_code(answer) != wanted_code or answer.get("id") != id_:
        return f"expected error {wanted_code} for id {id_!r}, got {answer}"
    return None


def _initialized(server: RawServer, options: object = None, root: Path | None = None) -> str | None:
    server.send(initialize(options, root))
    answer = server.answer_to(1)
    if answer is None or "result" not in answer:
        return f"initialize failed: {answer}"
    server.send(notification("initialized", {}))
    return None


def _malformed_frame(data: bytes, code: int = PARSE_ERROR) -> Callable[[RawServer, Path], str | None]:
    def run(server: RawServer, _root: Path) -> str | None:
        return _initialized(server) or (server.send(data), _expect(server, code))[1] or _then_alive(server)

    return run


def _sequence(*steps: Callable[[RawServer, Path], str | None]) -> Callable[[RawServer, Path], str | None]:
    def run(server: RawServer, root: Path) -> str | None:
        for step in steps:
            problem = step(server, root)
            if problem:
                return problem
        return None

    return run


def _send(data: bytes) -> Callable[[RawServer, Path], str | None]:
    return lambda server, _root: server.send(data)


def _exits_with(status: int) -> Callable[[RawServer, Path], str | None]:
    def run(server: RawServer, _root: Path) -> str | None:
        got = server.status()
        return None if got == status else f"exit status {got}, expected {status}"

    return run


def _error(id_: object, code: int) -> Callable[[RawServer, Path], str | None]:
    return lambda server, _root: _expect(server, code, id_)


def _answered(id_: int) -> Callable[[RawServer, Path], str | None]:
    def run(server: RawServer, _root: Path) -> str | None:
        answer = server.answer_to(id_)
        return None if answer is not None and "result" in answer else f"request {id_}: {answer}"

    return run


def _start(options: object = None) -> Callable[[RawServer, Path], str | None]:
    return lambda server, root: _initialized(server, options, root)


def _open(name: str, text: str, version: int = 1) -> Callable[[RawServer, Path], str | None]:
    def run(server: RawServer, root: Path) -> str | None:
        server.send(
            notification(
                "textDocument/didOpen",
                {
                    "textDocument": {
                        "uri": (root / name).as_uri(),
                        "languageId": "python",
                        "version": version,
                        "text": text,
                    }
                },
            )
        )
        return None

    return run


def _write(name: str, text: str) -> Callable[[RawServer, Path], str | None]:
    """A file in the workspace, written before the server reads it."""
    return lambda _server, root: (root / name).write_text(text) and None


def _published(name: str, check: Callable[[list], str | None]) -> Callable[[RawServer, Path], str | None]:
    def run(server: RawServer, root: Path) -> str | None:
        uri = (root / name).as_uri()
        message = server.wait_for(
            lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
        )
        return f"no diagnostics published for {name}" if message is None else check(message["params"]["diagnostics"])

    return run


def _shown(*words: str) -> Callable[[RawServer, Path], str | None]:
    def run(server: RawServer, _root: Path) -> str | None:
        message = server.wait_for(
            lambda m: m.get("method") == "window/showMessage" and all(w in m["params"]["message"] for w in words)
        )
        return None if message is not None else f"no window/showMessage saying {words}"

    return run


FINDING = (
    "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\n"
    'mesh = jax.make_mesh((1,), ("x",))\nhost = NamedSharding(mesh, P(), memory_kind="pinned_host")\n\n\n'
    "@jax.jit\ndef step(x):\n    # caf\u00e9: not ASCII, so bytes and characters differ\n"
    "    h = jax.device_put(x, host)\n    return x, h\n"
)


def _some_diagnostics(diagnostics: list) -> str | None:
    return None if diagnostics else "no diagnostic for a file with a finding"


def _no_diagnostics(diagnostics: list) -> str | None:
    return None if not diagnostics else f"diagnostics for a refused document: {diagnostics[:1]}"


def large_document(size: int) -> str:
    """Many functions, one in twenty moving a value to host: a generated module of ``size`` characters."""
    head, parts, i = FINDING, [FINDING], 0
    total = len(head)
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


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("content-length-not-a-number", _malformed_frame(b"Content-Length: abc\r\n\r\n{}")),
    Scenario("content-length-missing", _malformed_frame(b"Content-Type: application/json\r\n\r\n{}")),
    Scenario("header-line-without-colon", _malformed_frame(b"garbage\r\n\r\n{}")),
    Scenario("negative-content-length", _malformed_frame(b"Content-Length: -5\r\n\r\n{}")),
    Scenario("body-not-json", _malformed_frame(frame(raw=b"{not json"))),
    Scenario("body-not-utf8", _malformed_frame(frame(raw=b'{"jsonrpc": "2.0", "\xff": 1}'))),
    Scenario("body-a-json-array", _malformed_frame(frame([1, 2]), INVALID_REQUEST)),
    Scenario(
        "body-without-jsonrpc",
        _sequence(_start(), _send(frame({"id": 5, "method": "shutdown"})), _error(5, INVALID_REQUEST), _then_alive),
    ),
    Scenario(
        "request-before-initialize",
        _sequence(
            _send(request(3, "textDocument/codeAction", {})), _error(3, SERVER_NOT_INITIALIZED), _start(), _then_alive
        ),
    ),
    Scenario(
        "invalid-params",
        _sequence(
            _start(), _send(request(4, "textDocument/codeAction", {"bogus": 1})), _error(4, INVALID_PARAMS), _then_alive
        ),
    ),
    Scenario(
        "params-of-the-wrong-type",
        _sequence(
            _start(), _send(request(4, "textDocument/codeAction", [1, "x"])), _error(4, INVALID_PARAMS), _then_alive
        ),
    ),
    Scenario(
        "notification-with-invalid-params",
        _sequence(_start(), _send(notification("textDocument/didOpen", {"x": 1})), _then_alive),
    ),
    Scenario(
        "unknown-method",
        _sequence(_start(), _send(request(6, "offload/nothing", {})), _error(6, METHOD_NOT_FOUND), _then_alive),
    ),
    Scenario(
        "unknown-method-without-params",
        _sequence(_start(), _send(request(7, "offload/nothing")), _error(7, METHOD_NOT_FOUND), _then_alive),
    ),
    Scenario("unknown-notification", _sequence(_start(), _send(notification("offload/nothing", {})), _then_alive)),
    Scenario(
        "pyproject-nested-3000-deep",
        _sequence(
            _write("pyproject.toml", "[tool.offload-fixer]\nx = " + "[" * 3000 + "]" * 3000 + "\n"),
            _start(),
            _open("train.py", FINDING),
            _shown("pyproject.toml", "nested too deeply"),
            _published("train.py", lambda d: None),
            _then_alive,
        ),
    ),
    Scenario(
        "pyproject-a-fifo",
        _sequence(
            lambda _server, root: os.mkfifo(root / "pyproject.toml"),
            _start(),
            _open("train.py", FINDING),
            _shown("pyproject.toml", "FIFO"),
            _published("train.py", lambda d: None),
            _then_alive,
        ),
    ),
    Scenario(
        "settings-of-the-wrong-type",
        _sequence(
            _start({"select": 5, "target": 7, "debounceMs": "soon", "ignore": [1]}),
            _open("train.py", FINDING),
            _shown("editor settings", "select"),
            _published("train.py", lambda d: None),
            _then_alive,
        ),
    ),
    Scenario("settings-not-an-object", _sequence(_start("tpu"), _then_alive)),
    Scenario(
        "request-after-shutdown",
        _sequence(
            _start(),
            _send(request(2, "shutdown")),
            _answered(2),
            _send(request(3, "textDocument/codeAction", {})),
            _error(3, INVALID_REQUEST),
            _send(notification("exit")),
            _exits_with(0),
        ),
    ),
    Scenario("exit-without-shutdown", _sequence(_start(), _send(notification("exit")), _exits_with(1))),
    Scenario(
        "shutdown-then-exit",
        _sequence(_start(), _send(request(2, "shutdown")), _answered(2), _send(notification("exit")), _exits_with(0)),
    ),
    Scenario("input-closed-without-exit", _sequence(_start(), lambda s, _r: s.close_input(), _exits_with(1))),
    Scenario(
        "message-over-the-size-limit",
        _sequence(
            _start(),
            _send(b"Content-Length: %d\r\n\r\n" % (64 * 1024 * 1024 + 1)),
            lambda s, _r: s.close_input(),
            _exits_with(1),
        ),
    ),
    Scenario(
        "non-ascii-document",
        _sequence(
            _start({"jaxVersion": "0.4.26"}),
            _open("train.py", FINDING),
            _published("train.py", _some_diagnostics),
            _then_alive,
        ),
    ),
    Scenario(
        "five-megabyte-document-refused",
        _sequence(
            _start({"jaxVersion": "0.4.26"}),
            _open("huge.py", large_document(5_000_000)),
            _shown("huge.py", "characters"),
            _published("huge.py", _no_diagnostics),
            _then_alive,
        ),
    ),
)


def run_scenario(scenario: Scenario, root: Path) -> tuple[str | None, float]:
    """(what went wrong or None, seconds)."""
    server = RawServer(root)
    start = time.perf_counter()
    errors = b""
    try:
        problem = scenario.run(server, root)
    finally:
        took = time.perf_counter() - start
        errors = server.stop()
    if problem is None and b"Traceback (most recent call last)" in errors:
        problem = "a traceback on stderr:\n" + errors.decode(errors="replace")[-3000:]
    return problem, took


def time_large_document(root: Path, size: int, jax_version: str = "0.4.26") -> tuple[float, int, str]:
    """Seconds from ``didOpen`` to the server's answer for a document of ``size`` characters
    (its diagnostics, or its refusal); the number of diagnostics; which it was."""
    server = RawServer(root)
    try:
        problem = _initialized(server, {"jaxVersion": jax_version}, root)
        if problem:
            raise RuntimeError(problem)
        uri = (root / "large.py").as_uri()
        start = time.perf_counter()
        _open("large.py", large_document(size))(server, root)
        answer = server.wait_for(
            lambda m: (
                m.get("method") == "window/showMessage"
                or (m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)
            ),
            timeout=3600,
        )
        took = time.perf_counter() - start
        if answer is None:
            return took, 0, "no answer"
        if answer["method"] == "window/showMessage":
            return took, 0, "refused"
        return took, len(answer["params"]["diagnostics"]), "analysed"
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------
# Messages nested deeply: answered, never fatal
DEPTHS = (65, 100, 500, 999, 1_000, 1_001, 5_000, 100_000, 1_000_000)
SHAPES = ("array", "object", "interleaved", "in a string")
CARRIERS = ("request params", "notification params", "initializationOptions")
MESSAGES_PER_SERVER = 8


def deep_value(shape: str, depth: int) -> bytes:
    """A JSON value nested ``depth`` levels deep (``in a string``: a string that spells it)."""
    if shape == "array":
        return b"[" * depth + b"]" * depth
    if shape == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    if shape == "interleaved":
        return b'[{"a":' * (depth // 2) + b"[1]" + b"}]" * (depth // 2)
    return json.dumps("[" * depth + "]" * depth).encode()


def _deep_message(carrier: str, value: bytes, id_: int) -> bytes:
    if carrier == "request params":  # a command no server registers: answered with an error of its id
        return frame(
            raw=b'{"jsonrpc":"2.0","id":%d,"method":"workspace/executeCommand",' % id_
            + b'"params":{"command":"offload-fixer.nothing","arguments":[%s]}}' % value
        )
    if carrier == "notification params":
        return frame(raw=b'{"jsonrpc":"2.0","method":"offload/nothing","params":{"x":%s}}' % value)
    return frame(
        raw=b'{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"processId":null,"capabilities":{},' % id_
        + b'"rootUri":null,"initializationOptions":%s}}' % value
    )


def deep_messages(count: int, seed: int, root: Path) -> tuple[Counter, list[str]]:
    """``count`` messages nested deeply, several per server: each that nests past the server's
    limit gets a JSON-RPC ParseError (id null), any other its usual answer; after them the
    server answers a request and ends with status 0, no traceback on its stderr."""
    rng = random.Random(seed)
    counts: Counter = Counter()
    details: list[str] = []
    sent = 0
    while sent < count:
        batch = min(MESSAGES_PER_SERVER, count - sent)
        server = RawServer(root)
        problems: list[str] = []
        try:
            problems += _deep_batch(server, rng, batch, counts)
        except BrokenPipeError:
            problems.append(f"the server ended (status {server.process.poll()}) while messages were sent")
        finally:
            errors = server.stop()
        sent += batch
        if b"Traceback (most recent call last)" in errors:
            problems.append("a traceback on stderr:\n" + errors.decode(errors="replace")[-2000:])
        counts["servers"] += 1
        counts["failed"] += len(problems)
        details += problems
    return counts, details


def _deep_batch(server: RawServer, rng: random.Random, batch: int, counts: Counter) -> list[str]:
    problems = []
    for index in range(batch):
        depth, shape = rng.choice(DEPTHS), rng.choice(SHAPES)
        carrier = "initializationOptions" if index == 0 else rng.choice(CARRIERS[:2])
        id_ = 100 + index
        label = f"{shape} {depth} deep in {carrier}"
        counts[f"{carrier} messages"] += 1
        server.send(_deep_message(carrier, deep_value(shape, depth), id_))
        if shape == "in a string":
            if carrier != "notification params" and server.answer_to(id_) is None:
                problems.append(f"{label}: no answer to a message nested only in a string")
            elif carrier == "initializationOptions":
                server.send(notification("initialized", {}))
            continue
        answer = server.wait_for(lambda m: "error" in m and m.get("id") is None, timeout=WAIT_S)
        if error_code(answer) != PARSE_ERROR:
            problems.append(f"{label}: no ParseError, got {answer} (server status {server.process.poll()})")
            if server.process.poll() is not None:
                return problems
        elif carrier == "initializationOptions":
            problem = _initialized(server)
            if problem:
                problems.append(f"{label}: {problem}")
    problem = _then_alive(server)
    if problem:
        return [*problems, f"after the deep messages: {problem}"]
    server.send(notification("exit"))
    status = server.status()
    return problems if status == 0 else [*problems, f"after the deep messages: exit status {status}"]
