"""Settings for each document: ``[tool.offload-fixer]`` in the nearest ``pyproject.toml``
(exactly as the CLI reads it), overridden by what the editor sends (initializationOptions,
``workspace/didChangeConfiguration`` or a ``workspace/configuration`` pull).

Editor keys are camelCase: ``target``, ``strategy``, ``jaxVersion``, ``select``, ``ignore``,
and ``debounceMs`` (how long to wait after a change before analysing, :func:`wait_before`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException

from offload_fixer.config import ConfigError, Settings, SettingsResolver

log = logging.getLogger(__name__)

SECTION = "offload-fixer"
_SECTION_SPELLINGS = (SECTION, "offloadFixer", "offload_fixer")
DEFAULT_DEBOUNCE_MS = 25
_KEYS = {
    "target": "target",
    "strategy": "strategy",
    "jaxVersion": "jax_version",
    "select": "select",
    "ignore": "ignore",
}
_ALIASES = {
    "jax-version": "jaxVersion",
    "jax_version": "jaxVersion",
    "debounce-ms": "debounceMs",
    "debounce_ms": "debounceMs",
}


@dataclass(frozen=True)
class ClientOptions:
    """What the editor asked for; ``None`` leaves the file's (or the default) value."""

    target: str | None = None
    strategy: str | None = None
    jax_version: str | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    debounce_ms: int | None = None
    problems: tuple[str, ...] = field(default=(), compare=False)
    """Values of the wrong type, left out (the server shows them to the user)."""

    @classmethod
    def parse(cls, raw: Any) -> ClientOptions:
        """Accept ``{"target": ...}`` or ``{"offload-fixer": {"target": ...}}``; ignore other keys.
        A value of the wrong type is left out and named in ``problems``: an editor's settings
        never make ``initialize`` fail."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            return cls(problems=(f"settings must be an object, got {_type_name(raw)}",))
        for name in _SECTION_SPELLINGS:
            if isinstance(raw.get(name), dict):
                raw = raw[name]
                break
        raw = {_ALIASES.get(key, key): value for key, value in raw.items()}
        values: dict[str, Any] = {}
        problems: list[str] = []
        for key, field_name in _KEYS.items():
            value = raw.get(key)
            if value is None or value == "":
                continue
            if field_name in ("select", "ignore"):
                if isinstance(value, str):
                    value = [value]
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    problems.append(f"{key}: expected a list of codes (strings), got {value!r}; ignored")
                    continue
                value = tuple(value)
            elif not isinstance(value, str):
                problems.append(f"{key}: expected a string, got {value!r}; ignored")
                continue
            values[field_name] = value
        debounce = raw.get("debounceMs")
        if debounce is not None:
            if isinstance(debounce, (int, float)) and not isinstance(debounce, bool) and 0 <= debounce < 3_600_000:
                values["debounce_ms"] = int(debounce)
            else:
                problems.append(f"debounceMs: expected milliseconds (a number >= 0), got {debounce!r}; ignored")
        return cls(**values, problems=tuple(problems))

    def overrides(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "strategy": self.strategy,
            "jax_version": self.jax_version,
            "select": self.select,
            "ignore": self.ignore,
        }


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class SettingsStore:
    """The editor's options plus a resolver of ``pyproject.toml`` files, rebuilt when either changes."""

    def __init__(self) -> None:
        self.client = ClientOptions()
        self._resolver: SettingsResolver | None = None
        self.errors: list[str] = []
        """Configuration problems not yet shown to the user."""

    @property
    def debounce_s(self) -> float:
        ms = self.client.debounce_ms if self.client.debounce_ms is not None else DEFAULT_DEBOUNCE_MS
        return ms / 1000

    def set_client(self, options: ClientOptions) -> bool:
        changed = options != self.client
        self.client = options
        self._resolver = None
        self.errors.extend(f"editor settings: {problem}" for problem in options.problems)
        return changed

    def set_client_section(self, raw: Any) -> bool:
        """Settings pushed by ``didChangeConfiguration``; False when they hold nothing of ours
        (then the client expects us to pull them)."""
        if not isinstance(raw, dict) or not any(isinstance(raw.get(name), dict) for name in _SECTION_SPELLINGS):
            return False
        self.set_client(ClientOptions.parse(raw))
        return True

    async def pull(self, server: Any) -> bool:
        """Ask the client for our section (``workspace/configuration``) when it can answer."""
        if not get_capability(server.client_capabilities, "workspace.configuration", False):
            return False
        try:
            answer = await server.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            )
        except (JsonRpcException, RuntimeError) as exc:  # a failed request leaves our settings as they are
            log.warning("workspace/configuration failed: %s", exc)
            return False
        if not answer or not isinstance(answer[0], dict):
            return False
        return self.set_client(ClientOptions.parse(answer[0]))

    def forget_files(self) -> None:
        """A ``pyproject.toml`` changed: read the files again on next use."""
        self._resolver = None

    def for_path(self, path: str, root: str | None) -> Settings:
        """Settings for one document; a broken configuration falls back to the defaults plus
        the editor's options, and the error is queued for the user."""
        if self._resolver is None:
            self._resolver = SettingsResolver(overrides=self.client.overrides())
        target = path if Path(path).is_absolute() else (root or str(Path.cwd()))
        try:
            return self._resolver.settings_for(target)
        except (ConfigError, TypeError) as exc:
            self.errors.append(str(exc))
            try:
                return Settings(root=Path(root) if root else None).with_overrides(**self.client.overrides())
            except (ConfigError, TypeError) as inner:
                self.errors.append(str(inner))
                return Settings(root=Path(root) if root else None)


def wait_before(previous_change: float | None, now: float, debounce: float, idle: bool) -> float:
    """Seconds to wait before analysing a document changed at ``now`` (``time.monotonic()``),
    whose change before came at ``previous_change`` (None: none yet). ``idle``: the findings of
    every version before this one were published (or dropped), so no analysis is outstanding.

    The debounce coalesces a burst of changes that outpaces the analysis (typing faster than
    it answers, a paste sent as several edits): such a change waits ``debounce`` and a newer
    one restarts the wait, so the one worker never queues versions already stale. A change
    that finds the analysis idle, or comes a debounce after the one before, starts no such
    burst and is analysed at once: an edit is answered in the analysis's time, not the
    debounce's plus it."""
    if idle or previous_change is None or now - previous_change >= debounce:
        return 0.0
    return debounce


@dataclass
class ChangeClock:
    """One document's changes, for the debounce: when the last came, and whether an analysis
    whose findings are not published yet is outstanding (a text document or a notebook alike)."""

    changed_at: float | None = None
    outstanding: bool = False

    def delay_for_change(self, debounce: float) -> float:
        """The editor changed the document now: how long to wait before analysing it."""
        now = time.monotonic()
        delay = wait_before(self.changed_at, now, debounce, idle=not self.outstanding)
        self.changed_at = now
        return delay
