"""Offload policies whose destination is 'unpinned_host' offload nothing (OFL1204, source only)."""

import textwrap

import pytest

from offload_fixer.static import check_source

TEMPLATE = textwrap.dedent(
    """\
    import jax
    from jax.ad_checkpoint import Offloadable

    POLICY = {policy}


    @jax.jit
    def loss(x):
        return jax.checkpoint(lambda y: y * 2, policy=POLICY)(x).sum()
    """
)


@pytest.mark.parametrize(
    "policy",
    [
        "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
        'names_which_can_be_offloaded=["h"], offload_src="device", offload_dst="unpinned_host")',
        'jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "unpinned_host")',
        'lambda prim, *_, **__: Offloadable(src="device", dst="unpinned_host")',
    ],
)
def test_unpinned_destination_is_reported_where_it_is_written(policy):
    source = TEMPLATE.format(policy=policy)
    (diagnostic,) = [d for d in check_source(source, "policy.py").diagnostics if d.code == "OFL1204"]
    assert diagnostic.severity == "warning"
    line = source.splitlines()[diagnostic.span.line - 1]
    start = diagnostic.span.col - 1
    assert line[start : start + len('"unpinned_host"')] == '"unpinned_host"'


def test_pinned_destination_is_fine():
    policy = 'jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")'
    assert not check_source(TEMPLATE.format(policy=policy), "policy.py").diagnostics


@pytest.mark.parametrize(
    ("binding", "destination"),
    [
        ('DST = "unpinned_host"', "DST"),
        ('class Config:\n    offload_dst = "unpinned_host"', "Config.offload_dst"),
        (
            'import dataclasses\n@dataclasses.dataclass\nclass Config:\n    offload_dst: str = "unpinned_host"\n'
            "CONFIG = Config()",
            "CONFIG.offload_dst",
        ),
    ],
)
def test_a_destination_held_in_a_variable_is_reported_where_the_literal_is(binding, destination):
    policy = (
        "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
        f'names_which_can_be_offloaded=["h"], offload_src="device", offload_dst={destination})'
    )
    source = TEMPLATE.format(policy=policy).replace("POLICY =", f"{binding}\n\n\nPOLICY =")
    (diagnostic,) = [d for d in check_source(source, "policy.py").diagnostics if d.code == "OFL1204"]
    line = source.splitlines()[diagnostic.span.line - 1]
    assert line[diagnostic.span.col - 1 :].startswith('"unpinned_host"')


@pytest.mark.parametrize(
    "binding",
    [
        'DST = "unpinned_host"\nDST = "pinned_host"',  # bound twice: which one the policy sees is not told
        'DST = "pinned_host"',
        'def destination(DST="unpinned_host"):\n    return DST\nDST = "pinned_host"',
    ],
)
def test_a_variable_destination_that_may_be_pinned_is_not_reported(binding):
    policy = (
        "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
        'names_which_can_be_offloaded=["h"], offload_src="device", offload_dst=DST)'
    )
    source = TEMPLATE.format(policy=policy).replace("POLICY =", f"{binding}\n\n\nPOLICY =")
    assert not [d for d in check_source(source, "policy.py").diagnostics if d.code == "OFL1204"]


@pytest.mark.parametrize(
    "binding",
    [
        'DST = "unpinned_host"',
        'DST = "unpinned_host"\nDST = "pinned_host"',
        'def destination(DST="unpinned_host"):\n    return DST\nDST = "pinned_host"',
        'class Config:\n    offload_dst = "unpinned_host"\n\n\nDST = Config.offload_dst',
        'class Config:\n    offload_dst = "unpinned_host"\n\n\nclass Other:\n    offload_dst = "pinned_host"\n\n\n'
        "DST = Config().offload_dst",
        'DST = "unpinned_host"\nfor DST in ("pinned_host",):\n    pass',
        'UNUSED = "unpinned_host"\nDST = "pinned_host"',
    ],
)
def test_statement_by_statement_reads_the_policies_as_the_whole_module_does(binding):
    """The check of a file parses only the statements that can name a destination or bind a
    name one reads; its whole path, which parses every statement, finds the same."""
    from offload_fixer.static import SourceCache
    from offload_fixer.static.project import Project

    policy = (
        "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
        'names_which_can_be_offloaded=["h"], offload_src="device", offload_dst=DST)'
    )
    source = TEMPLATE.format(policy=policy).replace("POLICY =", f"{binding}\n\n\nPOLICY =")
    by_statement = check_source(source, "policy.py").diagnostics
    whole = check_source(source, "policy.py", cache=SourceCache(on_demand=False), project=Project()).diagnostics
    assert by_statement == whole


def test_a_class_in_pieces_is_visited_piece_by_piece_as_whole(monkeypatch):
    """Policy destinations and bindings found piece by piece in a class parsed in pieces (and
    kept with each piece) are those one visit of the whole class finds, in the same order."""
    from pathlib import Path

    from offload_fixer.static import class_pieces
    from offload_fixer.static.outline import outline
    from offload_fixer.static.policies import _Finder, visit_chunk
    from offload_fixer.static.source import Chunk

    monkeypatch.setattr(class_pieces, "SPLIT_CHARS", 1)
    monkeypatch.setattr(class_pieces, "PIECE_CHARS", 1)
    root = Path(__file__).resolve().parents[2]
    files = sorted([*(root / "offload_fixer").rglob("*.py"), *(root / "tests" / "static_vs_dynamic").rglob("*.py")])
    visited = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        for index, (start, end) in enumerate(outline(text).spans or []):
            chunk = Chunk.parse(text[start:end], index == 0)
            if chunk is None or not chunk.parts:
                continue
            whole = _Finder()
            chunk.statements[0].visit(whole)
            for _ in range(2):  # the second time from what each piece kept
                pieces = _Finder()
                visit_chunk(chunk, pieces)
                assert pieces.destinations == whole.destinations and pieces.bindings == whole.bindings, path
                assert pieces.classes == whole.classes == []
            visited += bool(whole.bindings)
    assert visited > 100
