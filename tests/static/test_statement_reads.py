"""What a statement group's ``ast`` tells (:class:`~offload_fixer.static.statement_reads.Group`)."""

from __future__ import annotations

import ast
from pathlib import Path

from offload_fixer.static.statement_reads import Group, _Reads

ROOT = Path(__file__).resolve().parents[2]


def test_a_class_is_read_member_by_member_as_one_walk_reads_it():
    """A top-level class's members are walked one by one (and kept by node, for the members a
    document's edit left alone): the same reads, in the same order, as one walk of it all."""
    classes = 0
    for path in sorted((ROOT / "offload_fixer").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        body = ast.parse(text).body
        for statements in ([s] for s in body):
            whole = _Reads()
            whole.walk([(s, False, False, False) for s in statements])
            for _ in range(2):  # the second time from the members' memo
                group = Group(statements, text)
                assert group.reads == whole.reads and group.value_reads == whole.value_reads, path
                assert group.imports == whole.imports and group.nested_imports == whole.nested_imports
                assert (group.attributes_read, group.attributes_stored) == (
                    whole.attributes_read,
                    whole.attributes_stored,
                )
                assert (group.has_class, group.value_spells_jit) == (whole.has_class, whole.value_spells_jit)
            classes += isinstance(statements[0], ast.ClassDef)
    assert classes > 100
