"""The LSP base protocol over stdio, strictly: every malformed message is answered, none wedges.

pygls' own reader skips a header it does not understand and then reads the body as more
headers: a ``Content-Length: abc`` makes it wait forever. A body that is not JSON, or whose
params do not fit the method, is logged and never answered; requests after ``shutdown`` are
dropped; ``exit`` without ``shutdown`` ends the process with status 0. This loop reads the
frames itself and hands well-formed messages to pygls' protocol:

* a header block without a valid ``Content-Length`` is answered with a JSON-RPC ``ParseError``
  (id null, as JSON-RPC 2.0 says for a message whose id cannot be known), and the reader
  resynchronises on the next ``Content-Length:`` header;
* a body that is not JSON, or JSON nested deeper than :data:`MAX_JSON_DEPTH` (Python's JSON
  decoder recurses once per level: a message a thousand levels deep would end the process
  with a ``RecursionError``, and the walks over params after it recurse too): ``ParseError``,
  decided before anything is decoded; JSON that is not a request, notification or
  response: ``InvalidRequest``; params that do not fit the method: ``InvalidParams`` with the
  request's id (a notification gets no answer, as the spec says); a request for a method
  neither the LSP nor this server defines: ``MethodNotFound``, whatever its params;
* before ``initialize``, requests are answered ``ServerNotInitialized``; after ``shutdown``,
  ``InvalidRequest``; notifications then are dropped;
* ``exit`` ends the loop: status 0 after ``shutdown``, else 1, as the LSP specifies.
"""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""A frame announcing more is refused (its body skipped) rather than read into memory."""
_SKIP_CHUNK = 1 << 20
MAX_JSON_DEPTH = 64
"""Arrays and objects nested in a message, at most: the LSP's deepest structures (a selection
range's parents, a document symbol's children) stay far below it in practice."""
_NESTING = bytes.maketrans(b"[{]}", b"(())")
_NOT_NESTING = bytes(range(256)).translate(None, b"[]{}")


class Exit(Exception):
    """The client sent ``exit`` (or closed stdin): the process status to end with."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


async def serve(protocol: Any, reader: Any, writer: Any) -> int:
    """Read frames from ``reader`` until ``exit`` or the end of input; returns the exit status."""
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_answered_here)
    state = _State()
    while True:
        frame = await _read_frame(reader, state, writer)
        if frame is None:  # stdin closed: the client is gone
            return 0 if protocol._shutdown else 1
        try:
            _dispatch(protocol, frame, state, writer)
        except Exit as done:
            return done.status


def _answered_here(record: logging.LogRecord) -> bool:
    """pygls logs a traceback for params that do not fit, and for a request its handler refuses
    as invalid (a command no one registered); the client gets InvalidParams, the log nothing."""
    from pygls.exceptions import JsonRpcInvalidParams

    refused = record.exc_info[1] if record.exc_info else None
    return not str(record.msg).startswith("Unable to deserialize message") and not isinstance(
        refused, JsonRpcInvalidParams
    )


class _State:
    def __init__(self) -> None:
        self.initialized = False
        self.resync = False
        """After a bad header block: skip input up to the next ``Content-Length:`` header."""


async def _read_frame(reader: Any, state: _State, writer: Any) -> bytes | None:
    while True:
        headers: dict[str, str] = {}
        problem = None
        while True:
            line = await reader.readline()
            if not line:
                return None
            if state.resync:
                start = line.lower().find(b"content-length:")
                if start < 0:
                    continue
                line, state.resync = line[start:], False
            if line.strip() == b"":
                if headers or problem:
                    break
                continue  # blank lines between messages
            name, sep, value = line.decode("ascii", "replace").partition(":")
            if not sep or not name.strip():
                problem = problem or f"malformed header line {line[:80]!r}"
                continue
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length")
        if problem is None and (length is None or not length.isdigit()):
            problem = "missing Content-Length header" if length is None else f"invalid Content-Length {length!r}"
        if problem is not None or length is None:
            _send_error(writer, None, PARSE_ERROR, f"{problem}; the message was skipped")
            state.resync = True
            continue
        size = int(length)
        if size > MAX_MESSAGE_BYTES:
            await _skip(reader, size)
            _send_error(
                writer,
                None,
                INVALID_REQUEST,
                f"a message of {size} bytes is over the {MAX_MESSAGE_BYTES} bytes this server reads",
            )
            continue
        body = await reader.readexactly(size) if size else b""
        if len(body) < size:
            return None
        return body


async def _skip(reader: Any, size: int) -> None:
    while size > 0:
        chunk = await reader.readexactly(min(size, _SKIP_CHUNK))
        if not chunk:
            return
        size -= len(chunk)


def _dispatch(protocol: Any, body: bytes, state: _State, writer: Any) -> None:
    if nested_too_deeply(body):
        _send_error(writer, None, PARSE_ERROR, f"the message is nested more than {MAX_JSON_DEPTH} levels deep")
        return
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        _send_error(writer, None, PARSE_ERROR, f"the message is not JSON: {exc}")
        return
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        _send_error(
            writer,
            data.get("id") if isinstance(data, dict) else None,
            INVALID_REQUEST,
            'not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")',
        )
        return
    method = data.get("method")
    request_id = data.get("id")
    is_request = method is not None and "id" in data
    if method is not None and not isinstance(method, str):
        _send_error(writer, request_id, INVALID_REQUEST, "method must be a string")
        return
    if ("id" in data and not (request_id is None or isinstance(request_id, (int, str)))) or isinstance(
        request_id, bool
    ):
        _send_error(writer, None, INVALID_REQUEST, "id must be a number or a string")
        return
    if method == "exit":
        raise Exit(0 if protocol._shutdown else 1)
    if method is not None and protocol._shutdown:
        if is_request:
            _send_error(writer, request_id, INVALID_REQUEST, f"{method}: the server has been shut down")
        return
    if method is not None and not state.initialized and method != "initialize":
        if is_request:
            _send_error(writer, request_id, SERVER_NOT_INITIALIZED, f"{method}: initialize first")
        return
    if is_request and method is not None and not _known_method(protocol, method):  # before its params are looked at
        _send_error(writer, request_id, METHOD_NOT_FOUND, f"{method}: no such method")
        return
    try:
        message = protocol.structure_message(data)
    except Exception as exc:  # noqa: BLE001 - cattrs says why the params do not fit
        if is_request:
            _send_error(writer, request_id, INVALID_PARAMS, f"{method}: invalid params ({_cause(exc)})")
        else:
            log.warning("ignored %s with invalid params: %s", method or "a response", _cause(exc))
        return
    if method == "initialize":
        state.initialized = True
    protocol.handle_message(message)


def nested_too_deeply(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects nest more than ``limit`` deep in a JSON text (strings left
    out), decided without decoding it and in C: a text with no more openers than ``limit`` is
    not; else its brackets outside strings lose their innermost pairs, pass after pass, until
    more than ``limit`` passes or openers in a row show the depth."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    outside = b"".join(body.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])
    nesting = outside.translate(_NESTING, _NOT_NESTING)  # "(" and ")" only
    in_a_row = b"(" * (limit + 1)
    passes = 0
    while nesting and passes <= limit:
        if in_a_row in nesting:
            return True
        inner = nesting.replace(b"()", b"")
        if inner == nesting:  # unbalanced: what is left opens without closing
            return passes + nesting.count(b"(") > limit
        nesting, passes = inner, passes + 1
    return passes > limit


def _known_method(protocol: Any, method: str) -> bool:
    """A method of the LSP specification, or one this server registered (a command)."""
    from lsprotocol.types import METHOD_TO_TYPES

    features = getattr(protocol, "fm", None)
    return (
        method in METHOD_TO_TYPES
        or method in getattr(features, "features", {})
        or method in getattr(features, "builtin_features", {})
    )


def _cause(exc: BaseException) -> str:
    """cattrs' account of what does not fit (``required field missing @ $.params.textDocument``)."""
    cause = exc.__cause__ or exc
    try:
        from cattrs import transform_error

        details = transform_error(cause, path="$")
    except Exception:  # noqa: BLE001 - not a cattrs error: its own message
        details = []
    if details:
        return "; ".join(details[:3])
    text = str(cause).strip().splitlines()
    return text[0] if text else type(cause).__name__


def _send_error(writer: Any, request_id: Any, code: int, message: str) -> None:
    log.warning("%s", message)
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}).encode()
    writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
