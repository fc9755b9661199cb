"""``offload-fixer lsp``: a language server over stdio (pygls).

Imports are lazy so that importing this package costs nothing until the server starts.
"""

from __future__ import annotations

import logging
import sys
from typing import BinaryIO


def serve_stdio(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Serve one client over stdin/stdout until it sends ``exit``; returns the process status
    the LSP specifies (0 after ``shutdown``, else 1). Logs go to stderr, never stdout (stdout
    carries the protocol). Framing and protocol errors are answered by
    :mod:`offload_fixer.lsp.transport`, which hands every well-formed message to pygls."""
    import asyncio
    import threading

    from offload_fixer.lsp import engine  # noqa: F401  (before the fork: the worker and the server both need it)
    from offload_fixer.lsp.worker import AnalysisWorker

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="offload-fixer lsp: %(message)s")
    worker = AnalysisWorker()  # first: it warms the analysis while the protocol is imported

    from pygls.io_ import StdinAsyncReader, StdoutWriter

    from offload_fixer.lsp.server import build_server
    from offload_fixer.lsp.transport import serve

    server = build_server(worker)
    server._stop_event = threading.Event()  # what pygls' own start_io sets up
    reader = StdinAsyncReader(stdin or sys.stdin.buffer, server.thread_pool)
    writer = StdoutWriter(stdout or sys.stdout.buffer)
    server.protocol.set_writer(writer)
    status = 1
    try:
        status = asyncio.run(serve(server.protocol, reader, writer))
    except BrokenPipeError:
        logging.getLogger(__name__).error("the client closed the connection")
    except KeyboardInterrupt:
        status = 130
    finally:
        server.analysis_pool.shutdown(wait=False, cancel_futures=True)
        server.shutdown()
    return status


def main() -> None:
    import os

    status = serve_stdio()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    # An analysis still running in its worker thread holds nothing worth waiting for: the
    # server never writes files. Python would join that thread before exiting.
    os._exit(status)


__all__ = ["main", "serve_stdio"]
