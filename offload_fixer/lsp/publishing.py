"""What the server's diagnostics carry whether they are published for a file or for a
notebook's cell: the source name a client files them under, their severities, their text."""

from __future__ import annotations

from lsprotocol import types

from offload_fixer.model import Diagnostic

NAME = "offload-fixer"
"""The server's name, and the ``source`` of every diagnostic it publishes (its own are told
apart by it when a client sends them back in a code-action request)."""
SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}


def message_of(diagnostic: Diagnostic, suffix: str = "") -> str:
    """What the editor shows: the finding's message (``suffix`` after it), and where a
    compiler judged it (``run
    --confirm``, or ``run`` on the accelerator itself), the compiler's own words in its coded
    form (``E1200: CompileTimeHostOffloadOutputLocationMismatch: ...`` and the error's page)."""
    if diagnostic.confirmed is None or not diagnostic.xla_message:
        return diagnostic.message + suffix
    from offload_fixer.xla_messages import summary

    by = f" by {diagnostic.confirmed_by}" if diagnostic.confirmed_by else ""
    verdict = "confirmed" if diagnostic.confirmed else "not confirmed"
    return f"{diagnostic.message}{suffix}\n{verdict}{by}: {summary(diagnostic.xla_message)}"
