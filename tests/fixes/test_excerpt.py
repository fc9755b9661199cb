"""Fixes edit an excerpt of the file (the statements they need) and splice it back: the same
result as editing the whole module, every other byte untouched."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer.codemods.host_output import HostOutputCommand
from offload_fixer.codemods.move_to_device import MoveToDeviceCommand, MoveToDeviceTarget
from offload_fixer.codemods.source_facts import SourceFacts
from offload_fixer.fixes.apply import fix_source_to_fixpoint, fix_to_fixpoint
from offload_fixer.fixes.excerpt import FileOutline

HEADER = '''\
"""Many helpers, one broken step."""  
import functools

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((1,), ("data",))
host = NamedSharding(mesh, P(), memory_kind="pinned_host")
unrelated = host   # uses host: counted, not needed
'''

HELPER = """

def helper_{i}(x):\t# a tab, trailing spaces   
    return x * {i}
"""

STEP = """

def step(x):
    h = jax.device_put(x, host)
    return h * 2, x
"""

JIT_SITE = """

step_jit = jax.jit(step)
"""


def program(helpers: int = 40) -> str:
    text = HEADER + "".join(HELPER.format(i=i) for i in range(helpers // 2)) + STEP
    return text + "".join(HELPER.format(i=i) for i in range(helpers // 2, helpers)) + JIT_SITE


def step_target(text: str, **kwargs: object) -> MoveToDeviceTarget:
    line = text.splitlines().index("def step(x):") + 1
    fields: dict = {"function_name": "step", "function_line": line, "output_paths": ("[0]",), "origin_line": line + 1}
    return MoveToDeviceTarget(**fields, **kwargs)


def test_excerpt_holds_only_what_the_fix_needs() -> None:
    text = program()
    source = FileOutline("p.py", text)
    excerpt = source.excerpt_for([step_target(text)])
    code = excerpt.module.code
    assert "def step(x):" in code and "step_jit = jax.jit(step)" in code
    assert 'host = NamedSharding(mesh, P(), memory_kind="pinned_host")' in code
    assert "mesh = jax.make_mesh" in code and "import functools" in code
    assert "helper_" not in code
    assert len(excerpt.module.body) < len(source.spans) / 4


def test_edits_match_a_whole_module_edit_and_keep_every_other_byte() -> None:
    text = program()
    target = step_target(text)
    for command in (HostOutputCommand, MoveToDeviceCommand):
        whole, _ = fix_to_fixpoint("p.py", cst.parse_module(text), [(command, target)])
        spliced, changed, passes = fix_source_to_fixpoint(FileOutline("p.py", text), [(command, target)])
        assert spliced == whole.code != text
        assert passes == 2 and changed
        before, after = text.splitlines(keepends=True), spliced.splitlines(keepends=True)
        kept = [line for line in before if line in after]
        assert len(kept) >= len(before) - 2  # the jit (host) or return (device) line, and an import


def test_codemods_report_file_lines_from_an_excerpt() -> None:
    text = program()
    target = step_target(text)
    source = FileOutline("p.py", text)
    excerpt = source.excerpt_for([target])
    codemod = MoveToDeviceCommand(
        CodemodContext(), targets=[target], line_map=excerpt.file_line, reference_count=source.reference_count
    )
    codemod.transform_module(excerpt.module)
    (edit,) = codemod.edits
    assert edit.line == target.function_line + 2  # the return, in the file's numbering


def test_reference_counts_are_the_whole_files() -> None:
    text = program()
    source = FileOutline("p.py", text)
    wrapper = MetadataWrapper(cst.parse_module(text))
    whole = SourceFacts.collect(wrapper.module, wrapper.resolve(PositionProvider))
    for name in ("host", "step", "mesh", "x", "helper_3"):
        assert source.reference_count(name) == whole.references(name), name


def test_a_file_that_cannot_be_cut_is_edited_whole() -> None:
    text = program(4).replace("unrelated = host", "unrelated = \\\n    host")
    text = text.replace('mesh = jax.make_mesh((1,), ("data",))\n', 'mesh = jax.make_mesh((1,), ("data",)); \\\n')
    source = FileOutline("p.py", text)
    target = step_target(text)
    assert source.excerpt_for([target]).whole
    spliced, _, _ = fix_source_to_fixpoint(source, [(HostOutputCommand, target)])
    whole, _ = fix_to_fixpoint("p.py", cst.parse_module(text), [(HostOutputCommand, target)])
    assert spliced == whole.code


def test_an_added_import_joins_the_imports() -> None:
    text = program(4).replace("import functools\n", "").replace(JIT_SITE, "").replace("def step", "@jax.jit\ndef step")
    target = step_target(text)
    spliced, _, _ = fix_source_to_fixpoint(FileOutline("p.py", text), [(HostOutputCommand, target)])
    whole, _ = fix_to_fixpoint("p.py", cst.parse_module(text), [(HostOutputCommand, target)])
    assert spliced == whole.code
    assert "from functools import partial\n" in spliced


def test_a_fixed_file_keeps_its_statements_in_order(tmp_path) -> None:
    # Found by the fuzz campaign (tests/fuzz): the fixture with a decorator function added,
    # CRLF and a BOM, fixed for JAX 0.4.26 with --strategy host, moved `with_memory_kind` up
    # into the chunk of `inline` (two edited functions beside an added import). The host
    # strategy now writes nothing there (the module shows several devices and no sharding is
    # in scope at the decorators), so the two functions are edited by `auto`'s moves.
    from offload_fixer.fixes import apply_plans, plan_fixes
    from offload_fixer.static import check_paths
    from tests.fuzz.campaign import changed_outside_statements

    text = (Path(__file__).parents[1] / "codemods" / "fixtures" / "pin_memory.before.py").read_text()
    text = text.replace("\n\nSTASH", "\n\ndef _identity(function):\n    return function\n\n\nSTASH", 1)
    text = text.replace("@jax.jit\ndef through_a_name", "@jax.jit\n@_identity\ndef through_a_name", 1)
    original = "\ufeff".encode() + text.replace("\n", "\r\n").encode()
    path = tmp_path / "program.py"
    path.write_bytes(original)
    diagnostics = [d for result in check_paths([str(path)], jax_version="0.4.26") for d in result.diagnostics]
    results = list(apply_plans(plan_fixes(diagnostics, strategy="auto", jax_version="0.4.26"), write=True, unsafe=True))
    assert [r.written for r in results] == [True]
    fixed = path.read_bytes()
    assert changed_outside_statements(original, fixed) == []
    order = [fixed.index(name.encode()) for name in ("def inline", "def through_a_name", "def with_memory_kind")]
    assert order == sorted(order)
