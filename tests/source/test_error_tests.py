"""Which lines a test expects to fail: the bodies of ``with pytest.raises`` and ``assertRaises``."""

from __future__ import annotations

import textwrap

from offload_fixer.source.error_tests import error_asserted_at

SOURCE = textwrap.dedent(
    """\
    import pytest
    from pytest import raises


    def test_refused():
        with pytest.raises(ValueError, match="E1200"):
            step(x)
        step(x)


    class TestRefused(unittest.TestCase):
        def test_it(self):
            with self.assertRaisesRegex(ValueError, "E1200"), open("log") as log:
                step(x)
            with raises(ValueError):
                step(x)
            with open("log"):
                step(x)
    """
)


def test_the_body_of_a_block_that_asserts_an_error_is_named_with_its_line():
    assert error_asserted_at(SOURCE, 7) == "`with pytest.raises(...)` (line 6)"
    assert error_asserted_at(SOURCE, 14) == "`with self.assertRaisesRegex(...)` (line 13)"
    assert error_asserted_at(SOURCE, 16) == "`with raises(...)` (line 15)"


def test_other_lines_are_not():
    # the with line itself (its arguments run before the block), after it, another with
    assert error_asserted_at(SOURCE, 6) is None
    assert error_asserted_at(SOURCE, 8) is None
    assert error_asserted_at(SOURCE, 18) is None
    assert error_asserted_at("def broken(:\n", 1) is None
