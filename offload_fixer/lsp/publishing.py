"""What the server's diagnostics carry whether they are published for a file or for a
notebook's cell: the source name a client files them under, and their severities."""

from __future__ import annotations

from lsprotocol import types

NAME = "offload-fixer"
"""The server's name, and the ``source`` of every diagnostic it publishes (its own are told
apart by it when a client sends them back in a code-action request)."""
SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}
