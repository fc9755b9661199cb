"""The rules' pages and examples: every example is a real program for the JAX it targets."""

from __future__ import annotations

import ast

import pytest

from offload_fixer import codes, jax_compat
from offload_fixer.model import TARGETS
from offload_fixer.rules import UnknownRule, all_rules, get_rule, render_rule

CODES = list(codes.ALL_CODES)
"""Every code has its rule module; a new one is tested here without editing this file."""
COMPILED = [code for code in CODES if not get_rule(code).judged_by_jax]
"""The codes whose examples are programs to lower (the others', JAX refuses: run as they are)."""
JUDGED_BY_JAX = [code for code in CODES if get_rule(code).judged_by_jax]
# One version per regime and per change of memory-kind names.
VERSIONS = ["0.4.20", "0.4.26", "0.4.35", "0.6.2", "0.7.1", "0.10.2", "0.11.1", "0.12.0.1"]


def test_one_rule_per_contract_code_in_order():
    assert [rule.code for rule in all_rules()] == CODES == sorted(CODES)
    assert {"OFL1200", "OFL1201", "OFL1202", "OFL1204", "OFL1205", "OFL1206", "OFL1207"} <= set(CODES)
    assert "OFL1203" not in CODES  # retired (no released compiler fails that CHECK): never reused
    names = [rule.name for rule in all_rules()]
    assert len(set(names)) == len(names)
    assert all(name == name.lower() and " " not in name and "_" not in name for name in names)


def test_every_rule_documents_every_target_and_fix_safety():
    for rule in all_rules():
        assert set(rule.targets) == set(TARGETS)
        assert rule.fixes, rule.code
        assert all(fix.safety in ("safe", "unsafe", "display-only") and fix.why for fix in rule.fixes)


def test_each_rule_is_the_module_named_for_its_code_and_keys_its_fixes_by_strategy():
    import importlib

    for rule in all_rules():
        assert importlib.import_module(f"offload_fixer.rules.{rule.code.lower()}").RULE is rule
        strategies = [fix.strategy for fix in rule.fixes if fix.strategy is not None]
        assert len(set(strategies)) == len(strategies), rule.code
        for strategy in strategies:
            option = rule.fix_option(strategy)
            assert (option.strategy, option.title, option.description) == (
                strategy,
                rule.fix(strategy).title,
                rule.fix(strategy).why,
            )
    with pytest.raises(KeyError, match="OFL1202 documents no 'host' fix"):
        get_rule("OFL1202").fix("host")


def test_ofl1200_is_an_error_on_both_targets():
    rule = get_rule("OFL1200")
    assert [rule.severity(t) for t in TARGETS] == ["error", "error"]
    assert "is returned from the entry computation" in rule.targets["tpu"].message
    assert rule.targets["gpu"].message == rule.targets["tpu"].message


def test_lookup_by_code_or_name_and_suggestions():
    assert get_rule("ofl1201").code == "OFL1201"
    assert get_rule("host-value-device-output").code == "OFL1200"
    with pytest.raises(UnknownRule, match="did you mean host-value-device-output"):
        get_rule("host-value-devise-output")
    with pytest.raises(UnknownRule, match="no rule 'OFL1299'"):
        get_rule("OFL1299")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("code", CODES)
def test_examples_are_python_for_every_version(code, version):
    rule = get_rule(code)
    invalid = rule.examples("invalid", version)
    valid = rule.examples("valid", version)
    assert invalid and valid and not set(invalid) & set(valid)
    for source in (*invalid, *valid):
        tree = ast.parse(source)
        compile(tree, f"<{code} {version}>", "exec")
        assigned = {
            t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)
        }
        defined = assigned | {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert rule.judged_by_jax or {"f", "args"} <= defined


def test_examples_spell_moves_for_the_version():
    rule = get_rule("OFL1201")
    assert "jax.memory.Space.Device" in rule.valid_example("0.10.2")
    older = rule.valid_example("0.6.2")
    assert "jax.memory" not in older and 'with_memory_kind("device")' in older
    oldest = rule.valid_example("0.4.20")
    assert 'memory_kind="unpinned_host"' in oldest and 'with_memory_kind("tpu_hbm")' in oldest


def test_render_rule_page():
    page = render_rule("OFL1200", jax_version="0.10.2")
    assert page.startswith("# OFL1200 host-value-device-output")
    for heading in ("## What it does", "## Why is this bad?", "## Example (JAX 0.10.2)", "## Fixes"):
        assert heading in page
    assert "(safe)" in page and "(unsafe)" in page and "(display-only)" in page
    assert get_rule("OFL1200").invalid_example("0.10.2").strip() in page


def test_a_page_for_a_version_the_pattern_does_not_reach_says_so():
    note = "does not produce this pattern"
    assert note in render_rule("OFL1204", jax_version="0.6.2")
    assert note not in render_rule("OFL1204", jax_version="0.10.2")
    assert note in render_rule("OFL1208", jax_version="0.12.0.1")  # libtpu 0.0.50.1 compiles it
    # Lane slices: libtpu 0.0.17.1 (JAX 0.6.2) fails an update of part of the lanes, as 0.0.42.1
    # does (the lane_update probes, built over compile-only TPU devices there).
    assert not any(note in render_rule("OFL1210", jax_version=v) for v in ("0.6.2", "0.10.2", "0.12.0.1"))
    assert note not in render_rule("OFL1208", jax_version="0.6.2")
    # Before JAX 0.7.1 nothing moves a host value back for a device output: error 1200 instead.
    assert note in render_rule("OFL1211", jax_version="0.6.2")
    assert note not in render_rule("OFL1211", jax_version="0.10.2")
    # Every rule says so exactly where its own ``applies`` leaves a version out: a new rule is
    # held to this without being listed here.
    for rule in all_rules():
        for version in VERSIONS:
            page = render_rule(rule.code, jax_version=version)
            assert (note in page) == (not rule.applies(jax_compat.spelling(version))), (rule.code, version)


# ---------------------------------------------------------------------------------------
# Lowering the examples with the installed JAX
def _lower(source: str, name: str, platform: str = "tpu"):
    namespace: dict = {}
    exec(compile(source, name, "exec"), namespace)
    return jax_compat.lower_for_platform(namespace["f"], namespace["args"], {}, platform)


def _operations(operation):
    yield operation
    for region in operation.regions:
        for block in region.blocks:
            for child in block.operations:
                yield from _operations(child.operation)


def _placements(lowered) -> list[str]:
    """``_xla_buffer_placement`` of every ``annotate_device_placement`` in the module."""
    from jax._src.lib.mlir import ir

    module = lowered.compiler_ir("stablehlo")
    found = []
    for op in _operations(module.operation):
        if op.name != "stablehlo.custom_call":
            continue
        if ir.StringAttr(op.attributes["call_target_name"]).value != "annotate_device_placement":
            continue
        attributes = ir.DictAttr(op.attributes["mhlo.frontend_attributes"])
        found.append(ir.StringAttr(attributes["_xla_buffer_placement"]).value)
    return found


needs_host_memory = pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(),
    reason="the examples build pinned_host shardings, which this JAX's CPU backend lacks",
)


@needs_host_memory
def test_ofl1200_invalid_example_lowers_with_a_move_to_host():
    lowered = _lower(get_rule("OFL1200").invalid_example(), "<OFL1200 invalid>")
    assert "pinned_host" in _placements(lowered)


@needs_host_memory
@pytest.mark.parametrize("code", JUDGED_BY_JAX)
def test_jax_refuses_each_invalid_example_of_a_rule_it_judges_and_runs_each_valid_one(code):
    """The programs of a rule JAX judges itself, run as they are under the installed JAX: each
    invalid one stops with JAX's refusal where the rule applies (and runs where it does not),
    each valid one runs."""
    rule = get_rule(code)
    for source in rule.examples("valid"):
        exec(compile(source, f"<{code} valid>", "exec"), {})
    for source in rule.examples("invalid"):
        if not rule.applies(jax_compat.spelling()):
            exec(compile(source, f"<{code} invalid>", "exec"), {})
            continue
        with pytest.raises(ValueError, match="memory_space of all inputs passed to"):
            exec(compile(source, f"<{code} invalid>", "exec"), {})


@needs_host_memory
@pytest.mark.parametrize("version", [None, "0.6.2"])
@pytest.mark.parametrize("code", COMPILED)
def test_examples_lower_for_tpu(code, version):
    """The installed JAX's examples, and the 0.4.29-0.7.0 spelling (whose APIs newer JAX keeps)."""
    rule = get_rule(code)
    for kind in ("invalid", "valid"):
        for source in rule.examples(kind, version):
            placements = _placements(_lower(source, f"<{code} {kind}>"))
            assert placements, f"{code} {kind} example moves nothing"


@needs_host_memory
def test_ofl1204_example_moves_to_unpinned_host_and_its_fix_does_not():
    rule = get_rule("OFL1204")
    assert _placements(_lower(rule.invalid_example(), "<OFL1204 invalid>")) == ["unpinned_host"]
    assert _placements(_lower(rule.valid_example(), "<OFL1204 valid>")) == ["pinned_host"]


@pytest.mark.skipif(not jax_compat.spelling().memory_space_api, reason="needs jax.memory.Space (JAX >= 0.7.1)")
def test_the_ofl1200_page_is_right_that_a_move_at_the_start_is_kept_for_a_streamed_argument():
    """JAX >= 0.7.1 types a host in_shardings argument traced from shapes as device memory;
    the page says the device fix still holds there, because JAX keeps the move."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    from offload_fixer import analyze

    host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")

    def broken(x):
        return x * 2

    def fixed(x):
        x = jax.device_put(x, jax.memory.Space.Device)
        return x * 2

    shape = jax.ShapeDtypeStruct((8,), jnp.float32)
    lowered = {
        f.__name__: jax_compat.lower_for_platform(jax.jit(f, in_shardings=host), (shape,), {}, "tpu")
        for f in (broken, fixed)
    }
    assert [d.code for d in analyze(lowered["broken"]).diagnostics if d.code == "OFL1200"] == ["OFL1200"]
    assert analyze(lowered["fixed"]).diagnostics == ()
    assert "the move is written where the function starts" in render_rule("OFL1200")


# ---------------------------------------------------------------------------------------
# Fixit's model: each rule's invalid example produces its own code, its valid example does
# not -- through the source check (for the codes it reports) and through the analysis of the
# program lowered with the installed JAX. tests/xla/test_rule_examples.py holds the examples
# against the released compilers, which decide what is right.
def _codes(diagnostics) -> set[str]:
    return {d.code for d in diagnostics}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("code", CODES)
def test_the_source_check_reports_each_invalid_example_and_no_valid_one(code, version, target):
    from offload_fixer.static.api import check_source

    rule = get_rule(code)
    found = {
        kind: [
            _codes(check_source(source, f"<{code} {kind}>", target=target, jax_version=version).diagnostics)
            for source in rule.examples(kind, version)
        ]
        for kind in ("invalid", "valid")
    }
    assert not any(code in reported for reported in found["valid"])
    for reported in found["invalid"]:
        if rule.checked_statically and not rule.static_scope and rule.applies(jax_compat.spelling(version)):
            assert code in reported
        else:
            assert code not in reported, f"`check` reports {code}, which its rule page says it does not"


@needs_host_memory
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("code", COMPILED)
def test_the_analysis_reports_each_invalid_example_and_no_valid_one(code, target):
    from offload_fixer import analyze

    rule = get_rule(code)
    platform = jax_compat.lowering_platform(target)
    if not rule.examples("invalid", target=target):
        pytest.skip("; ".join(rule.examples_not_for("invalid", target)))
    reports = {
        kind: [
            analyze(_lower(source, f"<{code} {kind}>", platform), target)
            for source in rule.examples(kind, target=target)
        ]
        for kind in ("invalid", "valid")
    }
    for valid in reports["valid"]:
        assert valid.diagnostics == (), f"the valid example of {code} is reported: {_codes(valid.diagnostics)}"
        assert valid.predicted.outcome == "compiled"
    if not rule.applies(jax_compat.spelling()) or rule.severity(target) == "info":
        # The compilers of this JAX (or this target) accept the pattern: nothing to report.
        assert not any(code in _codes(invalid.diagnostics) for invalid in reports["invalid"])
        return
    for invalid in reports["invalid"]:
        assert code in _codes(invalid.diagnostics)
        if rule.severity(target) == "error" and code != "OFL1204":
            # An error rule's pattern is what the compile stops at (OFL1204's move is a warning).
            assert (invalid.predicted.outcome, invalid.predicted.code) in {("rejected", code), ("aborted", code)}
