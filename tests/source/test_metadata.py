"""The metadata wrapper that skips libcst's empty batched walk resolves what libcst's does."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.metadata as metadata
import pytest

from offload_fixer.source.metadata import MetadataWrapper, node_positions

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))[:6]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_positions_are_libcsts(path):
    module = cst.parse_module(path.read_text())
    expected = metadata.MetadataWrapper(module, unsafe_skip_copy=True).resolve(metadata.PositionProvider)
    assert dict(node_positions(module)) == dict(expected)


def test_batchable_providers_still_visit_the_tree():
    module = cst.parse_module("def f(x):\n    return x + 1\n")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    parents, positions = (
        wrapper.resolve(metadata.ParentNodeProvider),
        wrapper.resolve(metadata.PositionProvider),
    )
    function = module.body[0]
    assert isinstance(function, cst.FunctionDef)
    assert parents[function.body] is function
    assert positions[function] == metadata.CodeRange((1, 0), (2, 16))


def test_an_empty_batched_visit_leaves_the_module_untouched():
    module = cst.parse_module("x = 1\n")
    assert MetadataWrapper(module, unsafe_skip_copy=True).visit_batched([]) is module
