"""Only the lines a fix changed come from libcst's print; every other line is the original's."""

from __future__ import annotations

import libcst as cst
import pytest

from offload_fixer.fixes.splice import splice


def fixed(original: str, edit) -> str:
    module = cst.parse_module(original)
    return splice(original, module.code, edit(module.code))


@pytest.mark.parametrize(
    ("original", "edit", "expected"),
    [
        # libcst drops the last \r of a CR-only file, and the blank line before a last line of spaces
        ("x = 1\ry = 2\r", lambda c: c.replace("x = 1", "x = 0"), "x = 0\ry = 2\r"),
        ("x = 1\ry = 2\r", lambda c: c.replace("y = 2", "y = 3"), "x = 1\ry = 3\r"),
        ("x = 1\n\n  ", lambda c: c.replace("x = 1", "x = 2"), "x = 2\n\n  "),
        ("def f():\n    pass\n\n\n   \n", lambda c: c.replace("pass", "return 1"), "def f():\n    return 1\n\n\n   \n"),
        # a mixed file keeps every line's own end next to an inserted line
        (
            "a = 1\r\nb = 2\nc = 3\r\n",
            lambda c: c.replace("b = 2\n", "b = 2\nnew = 1\n"),
            "a = 1\r\nb = 2\nnew = 1\nc = 3\r\n",
        ),
        ("import os\r\nx = 1\n", lambda c: "import sys\n" + c, "import sys\nimport os\r\nx = 1\n"),
        # a line added after the last one still leaves the file ending a line
        ("x = 1\r", lambda c: c + "\ry = 2", "x = 1\ry = 2\r"),
        ("x = 1", lambda c: c.replace("1", "2"), "x = 2"),  # no final newline stays none
    ],
)
def test_bytes_outside_the_edit_are_the_originals(original: str, edit, expected: str) -> None:
    assert fixed(original, edit) == expected


def test_nothing_changed_is_the_original_itself() -> None:
    original = "x = 1\n\n  "
    module = cst.parse_module(original)
    assert splice(original, module.code, module.code) is original


def test_restore_puts_the_cut_form_feeds_back_around_the_edit() -> None:
    from offload_fixer.fixes.splice import restore
    from offload_fixer.source.decoding import libcst_view

    original = "import jax\n\f\n@jax.jit\n\fdef f(x):\n    return x\n"
    view = libcst_view(original)
    edited = view.replace("@jax.jit\ndef f(x):", "@jax.jit(donate_argnums=0)\ndef f(x, y=1):")
    assert restore(original, view, edited) == (
        "import jax\n\f\n@jax.jit(donate_argnums=0)\n\fdef f(x, y=1):\n    return x\n"
    )
    assert restore(original, view, view) == original
