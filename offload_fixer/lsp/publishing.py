"""What the server's diagnostics and quick fixes are whether they are published for a file or
for a notebook's cell: the source name a client files them under, their severities, their text,
and the code actions made from the fixes a diagnostic carries in its ``data``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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


SUGGESTION = " (suggestion)"
"""ruff server's mark on the title of a fix it does not apply for you (a display-only fix)."""


def fix_actions(
    diagnostic: types.Diagnostic, data: Mapping[str, Any], base: Mapping[str, Any], disabled_support: bool
) -> list[types.CodeAction]:
    """A quick fix for each fix in a diagnostic's ``data``, as ``ruff server`` offers them: the
    preferred one (``isPreferred``) only where it is safe; a display-only fix, which no edit
    makes, titled ``(suggestion)`` and disabled with the reason, for clients that show disabled
    actions (never sent to the others). ``base``: what every action's ``data`` holds (the
    document and its version)."""
    actions = []
    for fix in data.get("fixes") or []:
        display_only = fix.get("safety") == "display-only"
        if display_only and not disabled_support:
            continue
        actions.append(
            types.CodeAction(
                title=fix["title"] + (SUGGESTION if display_only else ""),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                is_preferred=bool(fix.get("preferred")) and fix.get("safety") == "safe",
                disabled=types.CodeActionDisabled(reason=fix.get("reason") or "no edit") if display_only else None,
                data={
                    **base,
                    "strategy": fix["strategy"],
                    "requested": fix.get("requested", fix["strategy"]),
                    "diagnostic": data["diagnostic"],
                },
            )
        )
    return actions


def one_per_fix(actions: Iterable[types.CodeAction]) -> list[types.CodeAction]:
    """One action for each fix, however many of the diagnostics asked about it fixes (the
    OFL1200 and the OFL1201 of one root cause share its fix): the diagnostics it fixes
    together in one action, the first action's data kept (any of them plans the same fix)."""
    merged: dict[tuple, types.CodeAction] = {}
    for action in actions:
        data = action.data if isinstance(action.data, dict) else {}
        key = (action.kind, action.title, data.get("requested"), data.get("suppress"), data.get("line"))
        kept = merged.get(key)
        if kept is None:
            merged[key] = action
        elif action.diagnostics:
            kept.diagnostics = [
                *(kept.diagnostics or []),
                *(d for d in action.diagnostics if d not in (kept.diagnostics or [])),
            ]
    return list(merged.values())
