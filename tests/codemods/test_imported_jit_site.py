"""The state a streamed parameter becomes, kept host memory at a jit site in another module
than the function's ``def`` (a package's ``__main__.py``): ``out_shardings`` gives the returned
state the parameter's own ``in_shardings`` sub-tree, in the user's terms (issue 22)."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import libcst as cst
from libcst.codemod import CodemodContext

from offload_fixer.codemods.host_output import HostOutputCommand, HostOutputTarget

MAIN = """\
    import jax

    from .shardings import batch_shardings, state_shardings
    from .step import train_step


    def main():
        state_sh = state_shardings(True)
        step = jax.jit(train_step, in_shardings=(state_sh, batch_shardings()), donate_argnums=0)
        return step
"""
LEAVES = ("['opt']['mu']['w']", "['opt']['nu']['w']")
KINDS = (
    ("[0]['opt']['count']", "device"),
    ("[0]['opt']['mu']['w']", "device"),
    ("[0]['opt']['nu']['w']", "device"),
    ("[0]['params']['w']", "device"),
    ("[1]", "device"),
)


def _fix(source: str, **changes: object) -> tuple[str, HostOutputCommand]:
    target = HostOutputTarget(
        function_name="train_step",
        inner_line=9,
        output_paths=tuple(f"[0]{leaf}" for leaf in LEAVES),
        parameter="state",
        parameter_index=0,
        parameter_leaves=LEAVES,
        output_kinds=KINDS,
    )
    command = HostOutputCommand(CodemodContext(), replace(target, **changes))  # type: ignore[arg-type]
    module = command.transform_module(cst.parse_module(textwrap.dedent(source)))
    return module.code, command


def test_the_state_goes_out_with_the_sub_tree_it_came_in_with():
    code, command = _fix(MAIN)
    assert 'out_shardings=({"opt": state_sh["opt"], "params": None}, None)' in code
    assert [e.safety for e in command.edits] == ["safe"]
    compile(code, "main.py", "exec")


def test_no_edit_without_the_parameters_position():
    code, command = _fix(MAIN, parameter_index=None)
    assert code == textwrap.dedent(MAIN)
    assert command.problems and "not visibly the parameter's tree" in command.problems[0]


def test_an_existing_out_shardings_is_left_alone():
    source = MAIN.replace("donate_argnums=0)", "donate_argnums=0, out_shardings=None)")
    code, command = _fix(source)
    assert code == textwrap.dedent(source)
    assert command.problems and "already gives out_shardings" in command.problems[0]
