"""``offload-fixer lsp``: a language server over stdio (pygls).

Imports are lazy so that importing this package costs nothing until the server starts.
"""

from __future__ import annotations

import logging
import sys
from typing import BinaryIO


def serve_stdio(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Serve one client over stdin/stdout until it sends ``exit``. Logs go to stderr, never
    stdout (stdout carries the protocol)."""
    from offload_fixer.lsp.server import build_server

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="offload-fixer lsp: %(message)s")
    build_server().start_io(stdin, stdout)


def main() -> None:
    serve_stdio()


__all__ = ["main", "serve_stdio"]
