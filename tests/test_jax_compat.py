"""The compatibility layer: which JAX version spells what, checked against the installed JAX.

The table tests pin what each release line gets; the installed-JAX tests run in every test
environment (JAX 0.4.35, 0.6.2, 0.10.2, 0.12), so each spelling is checked where it is valid.
"""

from __future__ import annotations

import importlib.util
import inspect
import re

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import jax_compat
from offload_fixer.ir.module import frontend_attribute, load, walk_operations
from offload_fixer.jax_compat import HostCompute, Regime, UnsupportedJaxVersion
from offload_fixer.jax_compat import mlir as jax_mlir
from offload_fixer.jax_compat import tracing as jax_tracing
from tests.cli_support import in_terminal
from tests.jax_versions import NEWEST_NAMED, TOO_NEW


@pytest.mark.parametrize(
    "version, regime, host_compute",
    [
        ("0.4.28", Regime.LEGACY, None),
        ("0.4.29", Regime.PROPAGATION, HostCompute.CONTEXT),
        ("0.6.2", Regime.PROPAGATION, HostCompute.CONTEXT),
        ("0.10.2", Regime.TYPED, HostCompute.CONTEXT),
        ("0.11.0", Regime.TYPED, HostCompute.CONTEXT),
        ("0.11.1", Regime.TYPED, HostCompute.FUNCTION),
        ("0.12.0.1", Regime.TYPED, HostCompute.FUNCTION),
    ],
)
def test_spelling_per_release(version, regime, host_compute):
    spelling = jax_compat.spelling(version)
    assert (spelling.regime, spelling.host_compute) == (regime, host_compute)
    assert spelling.memory_space_api is (regime is Regime.TYPED)


@pytest.mark.parametrize("version", ["0.11", "0.12", "0.12.0.1", "0.12.7"])
def test_the_newest_modelled_line_is_accepted(version):
    assert jax_compat.check_modelled(version) == jax_compat.parse_version(version)


@pytest.mark.parametrize("version", TOO_NEW)
def test_a_newer_version_is_refused_naming_the_newest(version):
    newest = jax_compat.parse_version(jax_compat.NEWEST_MODELLED)
    line = re.escape(f"{newest[0]}.{newest[1]}.x")
    with pytest.raises(
        UnsupportedJaxVersion,
        match=rf"JAX {re.escape(version)} is newer than what offload-fixer models \({re.escape(NEWEST_NAMED)}, with its {line}",
    ):
        jax_compat.check_modelled(version)
    with pytest.raises(UnsupportedJaxVersion):
        jax_compat.spelling(version)


# ---------------------------------------------------------------------------------------
# The installed JAX has what its spelling says
def test_memory_space_api_matches_the_installed_jax():
    has_space = hasattr(jax, "memory") and hasattr(jax.memory, "Space") and hasattr(jax.memory.Space, "Device")
    assert jax_compat.spelling().memory_space_api is has_space


def test_transfer_to_memory_kind_matches_the_installed_jax():
    from jax._src import sharding_impls

    assert jax_compat.spelling().transfer_to_memory_kind is hasattr(sharding_impls, "TransferToMemoryKind")


@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="this JAX's CPU backend has no pinned_host")
def test_the_refusal_of_mixed_memory_spaces_matches_the_installed_jax():
    """Where the spelling says JAX refuses an operation on host and device operands, tracing one
    raises the refusal the package reads (naming the primitive); elsewhere it traces."""
    host = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")

    def mixed(w, x):
        return x @ jax.device_put(w, host)

    args = (jnp.ones((8, 4)), jnp.ones((2, 8)))
    if jax_compat.spelling().regime is jax_compat.Regime.TYPED:
        with pytest.raises(ValueError) as refused:
            jax.jit(mixed).trace(*args)
        assert jax_compat.mixed_memory_space_refusal(refused.value) == "dot_general"
    else:
        jax.jit(mixed).trace(*args)
    assert jax_compat.mixed_memory_space_refusal(ValueError("Incompatible shapes for broadcasting")) is None


def test_host_compute_shape_matches_the_installed_compute_on():
    from jax.experimental.compute_on import compute_on

    parameters = inspect.signature(compute_on).parameters
    expected = HostCompute.FUNCTION if "out_memory_spaces" in parameters else HostCompute.CONTEXT
    assert jax_compat.spelling().host_compute is expected


def test_compute_on_host_lowers_to_a_host_call():
    double = jax_compat.compute_on_host(jax.jit(lambda x: x * 2))

    def moved_then_doubled(x):
        return double(jax.device_put(x, jax_compat.memory_move_target("pinned_host")))

    lowered = jax_compat.lower_for_platform(moved_then_doubled, (jnp.arange(8.0),), {}, "tpu")
    view = load(lowered)
    host_calls = [
        op
        for op in walk_operations(view.main)
        if op.name == "func.call" and frontend_attribute(op, "_xla_compute_type") == "host"
    ]
    assert host_calls
    if jax_compat.regime() is Regime.TYPED:
        assert [r.memory_kind for r in view.results] == ["pinned_host"]


# ---------------------------------------------------------------------------------------
# jaxlib's bindings and JAX's tracing machinery, as each CI environment has them
BINDINGS_BY_JAXLIB = {
    # jaxlib: (typed location classes, Value.location, mlir.hlo_to_stablehlo, HloComputation.instructions)
    "0.4.35": (False, False, False, False),
    "0.6.2": (False, True, True, False),
    "0.10.2": (True, True, True, True),
    "0.12.0.1": (True, True, True, True),
}


def _lowered_text() -> str:
    lowered = jax.jit(lambda x: (x * 2, x)).lower(jnp.arange(3.0))
    return lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True)


def test_the_bindings_are_those_the_docstrings_name_for_the_installed_jaxlib():
    installed = jax_compat.installed_jaxlib_version()
    if installed not in BINDINGS_BY_JAXLIB:
        pytest.skip(f"jaxlib {installed} is not one of the CI's environments")
    module = jax_compat.parse_stablehlo(_lowered_text())
    argument = module.body.operations[0].regions[0].blocks[0].arguments[0]
    computation = next(iter(jax_mlir.stablehlo_to_hlo(_lowered_text()).computations()))
    from jaxlib.mlir import ir

    found = (
        jax_mlir.typed_locations(),
        jax_mlir.value_location(argument) is not None,
        hasattr(jax_mlir._mlir_bindings(), "hlo_to_stablehlo"),
        jax_mlir.hlo_instructions_of(computation) is not None,
    )
    assert found == BINDINGS_BY_JAXLIB[installed]
    assert jax_mlir.typed_locations() is hasattr(ir, "NameLoc")


def test_hlo_converts_back_to_stablehlo_in_jax_s_context():
    hlo_module = jax_mlir.stablehlo_to_hlo(_lowered_text())
    assert "multiply" in hlo_module.to_string()
    back = jax_mlir.hlo_to_stablehlo(hlo_module)
    from jaxlib.mlir import ir

    module = ir.Module.parse(back, context=jax_mlir.make_ir_context())
    assert module.operation.verify()
    names = jax_mlir.hlo_bindings().hlo_module_from_text(hlo_module.to_string()).name
    assert names == hlo_module.name


def test_each_computation_s_instructions_are_listed_where_jaxlib_lists_them():
    for computation in jax_mlir.stablehlo_to_hlo(_lowered_text()).computations():
        instructions = jax_mlir.hlo_instructions_of(computation)
        if instructions is not None:
            assert {str(i.opcode).rsplit(".", 1)[-1].removeprefix("k").lower() for i in instructions} >= {
                "parameter",
                "multiply",
            }


def test_trace_state_and_tracers_are_seen_inside_jit_only():
    outside_any_trace = jax_tracing.trace_state_check()
    seen = []

    def traced(x):
        seen.append((outside_any_trace(), isinstance(x, jax_tracing.tracer_class())))
        return x

    jax.jit(traced)(jnp.arange(3.0))
    assert seen == [(False, True)]
    assert outside_any_trace()
    assert not isinstance(jnp.arange(3.0), jax_tracing.tracer_class())


# ---------------------------------------------------------------------------------------
# `run` starts JAX quietly, and only its CPU backend where there is no accelerator
WHICH_BACKEND = """\
import os
import sys

import jax

print("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS"), "backend", jax.default_backend())
print("the program's own warning", file=sys.stderr)
"""
needs_libtpu_without_tpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None or jax_tracing.accelerator_visible(),
    reason="needs libtpu installed on a machine without an accelerator",
)


@needs_libtpu_without_tpu
@pytest.mark.slow
def test_run_keeps_the_plugins_start_up_off_the_terminal(tmp_path):
    """libtpu (and the CUDA plugin, where installed) print their start-up complaints on a
    machine without their hardware; under ``run`` none of it reaches the user, the program
    runs on the CPU backend without a TPU probe, and its own stderr is kept."""
    program = tmp_path / "which.py"
    program.write_text(WHICH_BACKEND)
    code, screen = in_terminal("run", str(program), cwd=tmp_path, unset=("JAX_PLATFORMS",), raw=True)
    assert code == 0, screen
    assert "JAX_PLATFORMS None backend cpu" in screen  # the user's environment is left as it was
    assert "the program's own warning" in screen
    for noise in ("TPU_WORKER_HOSTNAMES", "host bounds", "InitGoogle", "Source Location", "cudart_stub", "absl::"):
        assert noise not in screen, screen
    assert "Jax plugin configuration error" not in screen and "Traceback" not in screen
    shown = in_terminal("run", "--verbose", str(program), cwd=tmp_path, unset=("JAX_PLATFORMS",), raw=True)[1]
    assert "JAX_PLATFORMS None backend cpu" in shown


def test_the_tpu_runtimes_start_up_warning_is_left_out_and_the_rest_kept(capfd):
    """On a TPU v5e VM, importing JAX warns that transparent hugepages are off: a Python
    warning from JAX's own ``cloud_tpu_init.py``, its text as the chip's log recorded it
    (``tests/explain_fixtures/tpu_v5e_e1200.log``), printed by Python's warnings machinery
    with the line of source under it. While JAX starts, it is left out; another warning is not."""
    import os
    import warnings

    from jax._src import cloud_tpu_init

    from tests.cli_support import REPO

    recorded = (REPO / "tests" / "explain_fixtures" / "tpu_v5e_e1200.log").read_text(encoding="utf-8")
    text = re.search(r"UserWarning: (Transparent hugepages are not enabled\..*)", recorded)[1]
    lines = inspect.getsourcelines(cloud_tpu_init)[0]
    if not any("Transparent hugepages" in source for source in lines):
        pytest.skip(f"JAX {jax.__version__} does not warn about transparent hugepages")
    hugepages = next(n for n, source in enumerate(lines, 1) if "Transparent hugepages" in source)
    line = max(n for n, source in enumerate(lines[:hugepages], 1) if "warnings.warn(" in source)
    with jax_tracing._stderr_without_start_up_noise(verbose=False):
        for message in (text, "the program's own warning"):  # as Python's default showwarning prints it
            os.write(2, warnings.formatwarning(message, UserWarning, cloud_tpu_init.__file__, line).encode())
    err = capfd.readouterr().err
    assert "hugepages" not in err
    source = lines[line - 1].strip()
    # ``in``, not ``==``: a thread an earlier test of this worker left running may write too
    assert f"{cloud_tpu_init.__file__}:{line}: UserWarning: the program's own warning\n  {source}\n" in err


@needs_libtpu_without_tpu
@pytest.mark.slow
def test_the_users_jax_platforms_wins(tmp_path):
    """``JAX_PLATFORMS=""`` asks JAX to probe every backend: it does (libtpu starts, finds no
    TPU, and the CPU backend is the default), still without libtpu's noise; ``tpu`` alone
    fails as JAX fails, with JAX's own message."""
    program = tmp_path / "which.py"
    program.write_text(WHICH_BACKEND)
    code, screen = in_terminal("run", str(program), cwd=tmp_path, raw=True, JAX_PLATFORMS="")
    assert code == 0 and "JAX_PLATFORMS  backend cpu" in screen, screen
    assert "TPU_WORKER_HOSTNAMES" not in screen and "host bounds" not in screen, screen
    code, screen = in_terminal("run", str(program), cwd=tmp_path, raw=True, JAX_PLATFORMS="tpu")
    assert code == 3 and "Unable to initialize backend 'tpu'" in screen, screen


@needs_libtpu_without_tpu
@pytest.mark.slow
def test_the_kernel_extension_starts_jax_quietly_too(tmp_path):
    """``%load_ext offload_fixer`` in IPython: the cells' JAX starts on the CPU backend, and
    none of the plugins' start-up lines reach the user."""
    import os
    import shutil
    import subprocess
    import sys

    from tests.cli_support import environment

    ipython = shutil.which("ipython", path=os.path.dirname(sys.executable))
    if ipython is None:
        pytest.skip("IPython (the notebook extra) is not installed")
    cell = (
        "get_ipython().run_line_magic('load_ext', 'offload_fixer'); import jax; print('backend', jax.default_backend())"
    )
    env = {k: v for k, v in environment().items() if k != "JAX_PLATFORMS"}
    proc = subprocess.run(
        [ipython, "--no-banner", "-c", cell], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and "backend cpu" in proc.stdout, proc.stdout + proc.stderr
    for noise in ("TPU_WORKER_HOSTNAMES", "host bounds", "cudart_stub", "absl::", "Jax plugin configuration error"):
        assert noise not in proc.stdout + proc.stderr, proc.stderr


RENAMED = "jax_compat.MemorySpaceApi((0, 12, 0), 'jax.memory.Kind', host_member='Pinned', device_member='Hbm')"
"""A JAX release that renames ``jax.memory.Space`` and both members, as one table entry."""
RENAMED_SOURCE = """import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

host_sharding = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def update(params, grads, momentum):
    momentum = 0.9 * momentum + grads
    params = params - 0.1 * momentum
    return params, jax.device_put(momentum, jax.memory.Kind.Pinned)


f = jax.jit(update, in_shardings=(host_sharding, None, None))
"""
"""OFL1200's invalid example, written with the renamed spelling."""
RENAMED_MOVE = "import jax\n\n\n@jax.jit\ndef f(x):\n    return jax.device_put(x, jax.memory.Kind.Pinned)\n"
"""A file whose only host spelling is the renamed member: the prefilter decides on it alone."""
FAKE_RENAME = f"""
import json, sys
from offload_fixer import jax_compat
from offload_fixer.jax_compat import mlir as jax_mlir
from offload_fixer.jax_compat import tracing as jax_tracing
jax_compat.MEMORY_SPACE_APIS = (*jax_compat.MEMORY_SPACE_APIS, {RENAMED})
from offload_fixer.fixes import apply_plans, plan_fixes
from offload_fixer.rules import all_rules
from offload_fixer.rules.ofl1200 import fix_options
from offload_fixer.static import names
from offload_fixer.static.api import check_source
from offload_fixer.static.prefilter import may_hold_host_move

path, version = sys.argv[1], "0.12.0.1"
source = open(path).read()
spelling = jax_compat.spelling(version)
found = check_source(source, path, jax_version=version).diagnostics
plans = plan_fixes(list(found), "device", version)
fixed = apply_plans(plans, write=False)
examples = [text for rule in all_rules() for kind in ("invalid", "valid") for text in rule.examples(kind, version)]
print(json.dumps({{
    "prefilter": may_hold_host_move({RENAMED_MOVE!r}),
    "static_names": sorted(names.SPACE_HOST | names.SPACE_DEVICE),
    "codes": [d.code for d in found],
    "fixed": fixed[0].new_text if fixed else [(p.title, p.problems) for p in plans],
    "fix_text": [option.description for option in fix_options(False, spelling)],
    "examples": [text for text in examples if "jax.memory." in text],
}}))
"""


def test_a_renamed_memory_space_api_is_one_entry_in_jax_compat(tmp_path):
    """Fake a JAX release renaming ``jax.memory.Space.Host``/``.Device`` to
    ``jax.memory.Kind.Pinned``/``.Hbm``: one more :data:`jax_compat.MEMORY_SPACE_APIS` entry, set
    before the rest of the package is imported (in a process of its own), and nothing else.
    The prefilter lets the renamed spelling through, the static names know both, the static
    check finds the host output written with it, the codemod's fix, the fix text and the rule
    examples spell the new name for that version; without the entry the file is skipped."""
    import json
    import subprocess
    import sys

    from offload_fixer.static import names
    from offload_fixer.static.prefilter import may_hold_host_move

    assert not may_hold_host_move(RENAMED_MOVE)  # today's table does not know the new name
    assert "jax.memory.Kind.Pinned" not in names.SPACE_HOST
    program = tmp_path / "renamed.py"
    program.write_text(RENAMED_SOURCE)
    done = subprocess.run(
        [sys.executable, "-c", FAKE_RENAME, str(program)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["prefilter"] is True
    assert seen["static_names"] == [
        "jax.memory.Kind.Hbm",
        "jax.memory.Kind.Pinned",
        "jax.memory.Space.Device",
        "jax.memory.Space.Host",
    ]
    assert sorted(seen["codes"]) == ["OFL1200", "OFL1201"]  # the move, and the host compute it meets
    assert "params = jax.device_put(params, jax.memory.Kind.Hbm)\n" in seen["fixed"]
    assert "`jax.device_put(x, jax.memory.Kind.Hbm)`" in seen["fix_text"][0]
    assert "never `jax.memory.Kind.Pinned`" in seen["fix_text"][1]
    assert seen["examples"]
    for text in seen["examples"]:
        assert "jax.memory.Kind." in text and "jax.memory.Space" not in text, text
