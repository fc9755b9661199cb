"""The test methods of a candidate class that no host value reaches are never parsed, and the
findings are those of the whole class; a fix of a test class edits an excerpt without them and
splices back every other method byte for byte."""

from __future__ import annotations

import libcst
import pytest

from offload_fixer.codemods.targets import FunctionTarget
from offload_fixer.fixes.apply import check_intended
from offload_fixer.fixes.errors import FixVerificationError
from offload_fixer.fixes.excerpt import FileOutline
from offload_fixer.fixes.splice import splice
from offload_fixer.static.candidates import site_candidates
from offload_fixer.static.pruning import BLANKED_LINE, pruned_pieces

from .helpers import HEADER, TYPED
from .test_candidates import assert_same_as_whole, facts_of

PLAIN_TESTS = "".join(
    f"""
    def test_plain_{i}(self):
        return jax.jit(lambda x: jnp.sin(x) * {i})(jnp.ones(3))
"""
    for i in range(6)
)

OFFLOADING_TEST = """
    def test_offload(self):
        def f(x):
            return {"mu": jax.device_put(x, host) * 2}

        return jax.jit(f)(jnp.ones(3))
"""


def kept_methods(text: str) -> list[str]:
    """The names of the methods of the file's candidate classes that the check parses."""
    facts = facts_of(text)
    pruned = pruned_pieces(facts, None, "m.py", site_candidates(facts, None, "m.py"))
    kept = []
    for index, piece in enumerate(facts.pieces()):
        for line in pruned.get(index, piece).splitlines():
            if line.lstrip().startswith("def ") and line.startswith("    def"):
                kept.append(line.split("def ")[1].split("(")[0])
    return kept


def test_only_the_test_methods_a_host_value_reaches_are_parsed():
    text = HEADER + "\n\nclass TestMixed:\n" + PLAIN_TESTS + OFFLOADING_TEST
    assert kept_methods(text) == ["test_offload"]
    (finding,) = assert_same_as_whole(text)
    assert finding.output_path == "['mu']"


@pytest.mark.parametrize(
    ("members", "kept"),
    [
        pytest.param(
            "    def setUp(self):\n        self.place = host\n\n"
            "    def test_reads_it(self):\n        return jax.jit(lambda x: jax.device_put(x, self.place))(jnp.ones(3))\n",
            ["setUp", "test_reads_it"],
            id="an attribute a host-spelling method stores",
        ),
        pytest.param(
            "    def _move(self, x):\n        return jax.device_put(x, host)\n\n"
            "    def test_calls_it(self):\n        return jax.jit(self._move)(jnp.ones(3))\n",
            ["_move", "test_calls_it"],
            id="a helper method that moves to host",
        ),
        pytest.param(
            "    PLACE = host\n\n"
            "    def test_class_attribute(self):\n        return jax.jit(lambda x: jax.device_put(x, self.PLACE))(jnp.ones(3))\n",
            ["test_class_attribute"],
            id="a class attribute",
        ),
        pytest.param(
            "    def test_helper_of_another(self, x):\n        return x\n\n"
            "    def test_offload(self):\n        return jax.jit(lambda x: self.test_helper_of_another(jax.device_put(x, host)))(jnp.ones(3))\n",
            ["test_helper_of_another", "test_offload"],
            id="a test method another calls",
        ),
        pytest.param(
            "    def test_offload(self):\n        from jax import numpy as jnp_local\n"
            "        return jax.jit(lambda x: jax.device_put(jnp_local.sin(x), host))(jnp.ones(3))\n\n"
            "    def test_imports_the_same(self):\n        from jax import numpy as jnp_local\n"
            "        return jax.jit(jnp_local.cos)(jnp.ones(3))\n\n"
            "    def test_declares_it_global(self):\n        global jnp_local\n        from jax import numpy as jnp_local\n",
            ["test_offload", "test_declares_it_global"],
            id="a method's import is its own, unless declared global",
        ),
    ],
)
def test_what_a_host_value_can_reach_by_name_is_kept(members, kept):
    text = HEADER + "\n\nclass TestFlow:\n" + PLAIN_TESTS + members
    found = kept_methods(text)
    assert [name for name in found if not name.startswith("test_plain")] == kept
    assert not any(name.startswith("test_plain") for name in found)
    assert_same_as_whole(text)


def test_a_method_another_statement_names_is_kept_and_computed_names_keep_the_class():
    named = HEADER + "\n\nclass TestNamed:\n" + PLAIN_TESTS + OFFLOADING_TEST
    named += "\n\nrunner = jax.jit(TestNamed().test_plain_3, out_shardings=host)\n"
    assert kept_methods(named) == ["test_plain_3", "test_offload"]
    computed = (
        HEADER
        + "\n\nclass TestComputed:\n"
        + PLAIN_TESTS
        + OFFLOADING_TEST.replace("return jax.jit(f)", "getattr(self, 'test_plain_1')()\n        return jax.jit(f)")
    )
    assert len(kept_methods(computed)) == 7
    assert_same_as_whole(computed)


CLASS_WITH_FINDING = (
    HEADER
    + "\n\nclass TestFix:\n"
    + PLAIN_TESTS
    + """
    def test_offload(self):
        @jax.jit
        def f(x):
            moved = jax.device_put(x, host)
            return x * 2, {"m": moved * 2}

        return f(jnp.ones(3))
"""
    + PLAIN_TESTS.replace("plain", "after")
)


def fixed(path) -> str:
    from offload_fixer.fixes import apply_plans, plan_fixes
    from offload_fixer.static import check_paths

    path.write_text(CLASS_WITH_FINDING)
    found = [d for r in check_paths([str(path)], jax_version=TYPED) for d in r.diagnostics]
    assert found
    plans = plan_fixes(found, "device", jax_version=TYPED)
    assert plans and all(not p.problems for p in plans)
    assert all(r.error is None for r in apply_plans(plans, write=True))
    return path.read_text()


def test_a_fix_in_a_test_class_edits_an_excerpt_without_the_other_tests(tmp_path, monkeypatch):
    line = CLASS_WITH_FINDING.splitlines().index("        def f(x):") + 1
    excerpt = FileOutline("m.py", CLASS_WITH_FINDING).excerpt_for([FunctionTarget("f", line)])
    assert len(excerpt.blanked) == 12  # every plain test, before and after
    assert excerpt.module.code.count(BLANKED_LINE) == sum(
        (m.end_lineno or m.lineno) - m.lineno + 1 for m in excerpt.blanked
    )
    text = fixed(tmp_path / "pruned.py")
    monkeypatch.setattr(FileOutline, "pruned", lambda self, chunks, targets: {})
    assert text == fixed(tmp_path / "whole.py") != CLASS_WITH_FINDING
    assert BLANKED_LINE not in text
    changed = [(a, b) for a, b in zip(CLASS_WITH_FINDING.splitlines(), text.splitlines()) if a != b]
    assert changed and all("plain" not in a and "after" not in a for a, _ in changed)


def test_a_splice_that_loses_a_blanked_method_is_refused():
    source = FileOutline("m.py", CLASS_WITH_FINDING)
    line = CLASS_WITH_FINDING.splitlines().index("        def f(x):") + 1
    excerpt = source.excerpt_for([FunctionTarget("f", line)])
    edited = excerpt.module.code.replace("return f(jnp.ones(3))", "return f(jnp.zeros(3))")
    fixed_module = libcst.parse_module(edited)
    text, _ = excerpt.splice(fixed_module)
    assert text == CLASS_WITH_FINDING.replace("return f(jnp.ones(3))", "return f(jnp.zeros(3))")
    check_intended(source, excerpt, fixed_module, text)  # the splice as made: accepted
    for broken in (
        text.replace("jnp.sin(x) * 4", "jnp.cos(x) * 4"),  # a blanked method changed
        text.replace("    def test_after_2(self):\n", f"    {BLANKED_LINE}7\n    def test_after_2(self):\n"),
    ):
        with pytest.raises(FixVerificationError):
            check_intended(source, excerpt, fixed_module, broken)


def test_splice_takes_each_marked_line_as_its_original():
    original = "class T:\n    def test_a(self):\n        return 1\n\n    def test_b(self):\n        return 2\n"
    reprinted = f"class T:\n    {BLANKED_LINE}2\n    {BLANKED_LINE}3\n\n    def test_b(self):\n        return 2\n"
    fixed = reprinted.replace("return 2", "x = 2\n        return x")
    assert splice(original, reprinted, fixed) == original.replace("return 2", "x = 2\n        return x")
