"""Colour decisions and the progress line (drawn on a terminal only, erased when done)."""

from __future__ import annotations

import io
import os

import pytest

from offload_fixer.console import Progress, color_enabled


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "choice, env, tty, expected",
    [
        ("auto", {}, True, True),
        ("auto", {}, False, False),
        ("auto", {"NO_COLOR": "1"}, True, False),
        ("auto", {"NO_COLOR": ""}, True, True),  # set but empty: not asked
        ("auto", {"FORCE_COLOR": "1"}, False, True),
        ("auto", {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False, False),
        ("auto", {"TERM": "dumb"}, True, False),
        ("always", {"NO_COLOR": "1"}, False, True),
        ("never", {"FORCE_COLOR": "1"}, True, False),
    ],
)
def test_colour(monkeypatch, choice, env, tty, expected):
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert color_enabled(choice, Terminal() if tty else io.StringIO()) is expected


def test_progress_is_drawn_on_a_terminal_and_erased(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    screen = Terminal()
    with Progress(True, screen) as progress:
        progress.count("Checking", 1, 4)
        progress.count("Checking", 4, 4)
    assert screen.getvalue().startswith("\r\x1b[2KChecking  1/4  [######")
    assert "Checking  4/4  [" + "#" * 24 + "]" in screen.getvalue()
    assert screen.getvalue().endswith("\r\x1b[2K")


def test_no_progress_off_a_terminal_or_when_quiet_or_short():
    piped = io.StringIO()
    with Progress(True, piped) as progress:
        progress.show("working")
    quiet = Terminal()
    with Progress(False, quiet) as progress:
        progress.show("working")
    short = Terminal()
    with Progress(True, short, delay=60) as progress:
        progress.show("working")
    assert piped.getvalue() == quiet.getvalue() == short.getvalue() == ""


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_a_real_terminal_counts_as_one():
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as stream:
            assert Progress(True, stream).enabled or os.environ.get("TERM") == "dumb"
    finally:
        os.close(master)
        os.close(slave)
    assert not Progress(True, io.StringIO()).enabled
