"""A name a remat offload policy offloads that no ``checkpoint_name`` tags but one nearly spells
(OFL1211 from source): ``check`` reports it at the name's literal with the tag it was meant to
be, and ``check --fix`` respells the literal where one tag is close; the fixed program then
offloads (``run`` finds nothing, the compiled program holds host memory)."""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from offload_fixer import codes, jax_compat
from offload_fixer.static import check_source
from tests.cli_support import REPO, offload_fixer

PROGRAMS = {
    "name_typo_mlp": ("hiden", "hidden"),
    "name_typo_scanned_decoder": ("decoder_layer_input", "decoder_layer_inputs"),
}
FOLDER = REPO / "tests" / "runner_programs" / "silent_offloads"


def _findings(path: Path) -> list[dict]:
    proc = offload_fixer("check", "--format", "json", str(path))
    assert proc.returncode in (0, 1), proc.stderr
    return [d for d in json.loads(proc.stdout)["diagnostics"] if d["code"] == codes.OFFLOAD_DOES_NOTHING]


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_check_reports_the_misspelt_name_at_its_literal(program: str):
    path = FOLDER / f"{program}.py"
    name, tag = PROGRAMS[program]
    (finding,) = _findings(path)
    line = path.read_text().splitlines()[finding["span"]["line"] - 1]
    start = finding["span"]["col"] - 1
    assert line[start : start + len(name) + 2] == f'"{name}"'
    assert f"did you mean {tag!r}?" in finding["message"]
    assert finding["source"] == "static"


@pytest.mark.jax_dependent  # the fixed program runs under the installed JAX
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_check_fix_respells_the_name_and_the_program_then_offloads(program: str, tmp_path: Path):
    fixed = tmp_path / f"{program}.py"
    shutil.copy(FOLDER / f"{program}.py", fixed)
    name, tag = PROGRAMS[program]
    proc = offload_fixer("check", "--fix", str(fixed))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    before = (FOLDER / f"{program}.py").read_text().splitlines(keepends=True)
    after = fixed.read_text().splitlines(keepends=True)
    changed = [(old, new) for old, new in zip(before, after, strict=True) if old != new]
    assert len(changed) == 1 and "names_which_can_be_offloaded" in changed[0][0]
    assert changed[0][1] == changed[0][0].replace(f'"{name}"', f'"{tag}"')
    if jax_compat.regime() is jax_compat.Regime.TYPED:
        report = tmp_path / "report.json"
        proc = offload_fixer("run", "--format", "json", "-o", str(report), str(fixed))
        assert proc.returncode == 0, proc.stderr
        assert not [d for d in json.loads(report.read_text())["diagnostics"] if d["code"] == codes.OFFLOAD_DOES_NOTHING]


@pytest.mark.jax_dependent  # lowered by the installed JAX, compiled by its libtpu
def test_the_fixed_policy_holds_host_memory_when_compiled(tpu_compiler):
    """What the respelt name buys, in the compiled program's memory figures."""
    import runpy

    import jax
    import jax.numpy as jnp

    import offload_fixer as api

    if jax_compat.regime() is not jax_compat.Regime.TYPED:
        pytest.skip("remat offloads lower with memory spaces in types from JAX 0.7.1")
    text = (FOLDER / "name_typo_mlp.py").read_text()
    shapes = {"w1": jax.ShapeDtypeStruct((128, 512), jnp.float32), "w2": jax.ShapeDtypeStruct((512, 128), jnp.float32)}
    batch = jax.ShapeDtypeStruct((16, 128), jnp.float32)
    held = {}
    for spelled in ("hiden", "hidden"):
        namespace = runpy.run_path(str(FOLDER / "name_typo_mlp.py"), init_globals=None)
        if spelled == "hidden":
            exec(compile(text.replace('"hiden"', '"hidden"'), "name_typo_mlp_fixed.py", "exec"), namespace)
        report = api.check(namespace["train_grad"], shapes, batch, batch, confirm=True)
        assert report.xla is not None and report.xla.memory is not None
        held[spelled] = report.xla.memory.host_total
    assert held == {"hiden": 0, "hidden": held["hidden"]} and held["hidden"] > 0


SOURCE = textwrap.dedent(
    """\
    import jax
    from jax.ad_checkpoint import checkpoint_name
    {imports}
    POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=[{names}],
        offload_src="device", offload_dst="pinned_host",
    )


    def layer(x, w, tag):
        return checkpoint_name(x @ w, {tag})
    """
)


@pytest.mark.parametrize(
    ("names", "tag", "imports"),
    [
        ('"hidden"', '"hidden"', ""),  # tagged
        ('"attention_weights"', '"hidden"', ""),  # close to no tag: perhaps tagged in another module
        ('"hiden"', "tag", ""),  # a tag the source computes
        ('"hiden"', 'f"hidden"', ""),
    ],
    ids=["tagged", "no close tag", "computed tag", "f-string tag"],
)
def test_what_the_source_cannot_show_is_not_reported(names: str, tag: str, imports: str):
    source = SOURCE.format(names=names, tag=tag, imports=imports)
    assert not [d for d in check_source(source, "model.py").diagnostics if d.code == codes.OFFLOAD_DOES_NOTHING]


def test_a_name_close_to_two_tags_is_reported_and_left_for_the_author(tmp_path: Path):
    source = SOURCE.format(names='"block_out"', tag='"block_out1"', imports="") + textwrap.dedent(
        """\


        def other(x):
            return checkpoint_name(x, "block_out2")
        """
    )
    path = tmp_path / "model.py"
    path.write_text(source)
    (finding,) = _findings(path)
    assert re.search(r"did you mean '(block_out1|block_out2)'\?", finding["message"])
    proc = offload_fixer("check", "--fix", str(path))
    assert proc.returncode == 1 and path.read_text() == source
