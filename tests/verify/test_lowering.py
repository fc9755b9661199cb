"""The pieces of a fix's verification that need no compiler: which files may be imported to
lower a fix, recorded arguments rebuilt on the fixed module's classes, and how a fix's memory
figures read."""

import dataclasses
import importlib.util
import json
import types
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pytest

from offload_fixer import jax_compat
from offload_fixer.model import (
    HBM_FLOOR,
    HOST_BUFFER_STAGING,
    HOST_OUTPUTS_BASELINE,
    NO_OFFLOAD_BASELINE,
    FixMeasurement,
    MemoryFigures,
    describe_measurements,
)
from offload_fixer.verify.fixed_modules import import_safe
from offload_fixer.verify.lowering import rehome


def test_a_module_that_only_defines_things_is_imported():
    assert import_safe('"""Doc."""\nimport jax\nX = 1\ndef f():\n    pass\nif __name__ == "__main__":\n    f()\n')


def test_a_script_that_trains_at_module_level_is_not_imported():
    assert not import_safe("import jax\nfor step in range(3):\n    print(step)\n")
    assert not import_safe("def main():\n    pass\nmain()\n")


class _Old(NamedTuple):
    mu: object
    count: object


@dataclasses.dataclass
class _OldState:
    params: object
    moments: object


def test_recorded_arguments_are_rebuilt_on_the_fixed_modules_classes():
    fixed = types.ModuleType("fixed")

    class _New(NamedTuple):
        mu: object
        count: object

    @dataclasses.dataclass
    class _NewState:
        params: object
        moments: object

    _New.__qualname__, _NewState.__qualname__ = "_Old", "_OldState"
    fixed._Old, fixed._OldState = _New, _NewState
    leaf = jax.ShapeDtypeStruct((2,), np.float32)
    args = ({"state": _OldState(params=[leaf], moments=_Old(leaf, leaf))}, (leaf,))
    rebuilt = rehome(args, fixed)
    state = rebuilt[0]["state"]
    assert type(state) is _NewState and type(state.moments) is _New
    assert state.params == [leaf] and state.moments.mu is leaf and rebuilt[1] == (leaf,)


def test_classes_the_fixed_module_lacks_are_kept():
    value = _Old(1, 2)
    assert rehome(value, types.ModuleType("empty")) == value


def _measured(after: MemoryFigures, before: MemoryFigures | None, function: str = "step") -> FixMeasurement:
    return FixMeasurement(function, "tpu", "libtpu 0.0.42.1", after, before)


def test_memory_figures_read_as_the_change_in_hbm_and_what_host_keeps():
    before = MemoryFigures(argument=4 << 20, output=1 << 10, temp=0, host_argument=2 << 30)
    after = MemoryFigures(argument=4 << 20, output=1 << 10, temp=4 << 20, host_argument=2 << 30)
    assert _measured(after, before).summary == "HBM 8.0 MiB (+4.0 MiB temporaries), host 2.0 GiB kept"
    assert _measured(after, None).summary == "HBM 8.0 MiB, host 2.0 GiB"
    smaller = MemoryFigures(argument=4 << 20, output=1 << 10, temp=0, host_argument=1 << 30)
    assert _measured(smaller, after).summary == "HBM 4.0 MiB (-4.0 MiB temporaries), host -1.0 GiB (now 1.0 GiB)"


def test_a_measurement_round_trips_in_bytes_with_its_line_beside_them():
    before = MemoryFigures(argument=4 << 20, host_argument=2 << 30)
    measured = _measured(MemoryFigures(argument=4 << 20, temp=4 << 20, host_argument=2 << 30), before)
    data = measured.to_dict()
    assert data["before"]["argument"] == 4 << 20 and data["after"]["temp"] == 4 << 20
    assert data["summary"] == measured.summary and data["target"] == "tpu"
    assert FixMeasurement.from_dict(data) == measured
    assert FixMeasurement.from_dict({**data, "before": None}).before is None


def test_a_fix_measured_in_several_functions_names_each():
    one = MemoryFigures(argument=1 << 20)
    assert describe_measurements([_measured(one, one)]) == "HBM 1.0 MiB (+0 B), host 0 B kept"
    assert describe_measurements([_measured(one, one, "f"), _measured(one, None, "g")]) == (
        "f: HBM 1.0 MiB (+0 B), host 0 B kept; g: HBM 1.0 MiB, host 0 B"
    )


def test_figures_against_the_program_without_its_offload_say_so_and_round_trip():
    before = MemoryFigures(argument=6 << 20)
    after = MemoryFigures(argument=2 << 20, host_argument=4 << 20)
    measured = FixMeasurement("step", "tpu", "libtpu 0.0.42.1", after, before, NO_OFFLOAD_BASELINE)
    assert measured.summary == "HBM 2.0 MiB (-4.0 MiB arguments against no offload), host 4.0 MiB kept"
    assert FixMeasurement.from_dict(measured.to_dict()) == measured
    assert FixMeasurement.from_dict({**measured.to_dict(), "baseline": HOST_OUTPUTS_BASELINE}).summary == (
        "HBM 2.0 MiB (-4.0 MiB arguments), host 4.0 MiB kept"
    )


def test_a_fix_says_what_it_holds_against_both_programs_and_what_it_moves_per_call():
    """The HBM the fixed program needs, its change against the unfixed program with its failing
    outputs declared host and against the program without its offload, what host memory keeps,
    and the bytes one call moves between host and device; a fix that keeps state on host yet
    needs more HBM than the program without offload defeats it, beyond the compiler's staging."""
    before = MemoryFigures(argument=4 << 20, output=1 << 10, temp=0, host_argument=2 << 30)
    after = MemoryFigures(argument=4 << 20, output=1 << 10, temp=4 << 20, host_argument=2 << 30)
    without = MemoryFigures(argument=4 << 20, temp=1 << 20)
    measured = FixMeasurement("step", "tpu", "libtpu 0.0.42.1", after, before, no_offload=without, moved=8 << 20)
    assert measured.summary == (
        "HBM 8.0 MiB (+4.0 MiB temporaries; +3.0 MiB against no offload), host 2.0 GiB kept, "
        "8.0 MiB moved host<->device per call"
    )
    # 3 MiB over the program without offload, beyond HBM_FLOOR: it defeats the offload
    assert measured.defeats_offload
    assert FixMeasurement.from_dict(measured.to_dict()) == measured
    staged = dataclasses.replace(without, temp=without.temp + HBM_FLOOR, host_argument=2 << 30)
    assert not FixMeasurement("step", "tpu", "libtpu 0.0.50.1", staged, before, no_offload=without).defeats_offload
    kept = FixMeasurement("step", "tpu", "libtpu 0.0.42.1", without, before, no_offload=after)
    assert not kept.defeats_offload


def test_a_fix_may_hold_the_compilers_staging_of_each_host_buffer_beyond_the_floor():
    """libtpu stages each copy between host and device in HBM, whatever the leaf's size: Adam's
    9 state leaves moved to device in the step and returned to host (18 host buffers) hold
    1.42 MiB beyond the step without offload for 5 KiB of state (libtpu 0.0.42.1's figures of
    tests/runner_programs/adam_tree_host_state.py). That is staging, not state: the fix keeps the
    offload's purpose; the same HBM without host buffers to stage, or beyond their staging,
    defeats it."""
    without = MemoryFigures(argument=22016, output=18432)
    after = MemoryFigures(
        argument=10240, output=6656, temp=1442 << 10, host_argument=11776, host_output=11776, host_buffers=18
    )
    assert after.device_total - without.device_total > HBM_FLOOR
    fixed = FixMeasurement("train_step", "tpu", "libtpu 0.0.42.1", after, no_offload=without)
    assert not fixed.defeats_offload
    assert dataclasses.replace(fixed, after=dataclasses.replace(after, host_buffers=0)).defeats_offload
    beyond = dataclasses.replace(after, temp=after.temp + 18 * HOST_BUFFER_STAGING)
    assert dataclasses.replace(fixed, after=beyond).defeats_offload


@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="needs pinned_host memory on the CPU backend")
def test_without_offload_makes_every_declared_host_kind_device_memory():
    from jax.sharding import NamedSharding, PartitionSpec

    from offload_fixer.xla.confirm import with_host_output, without_offload
    from offload_fixer.xla.oracle import module_text

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    host = NamedSharding(mesh, PartitionSpec(), memory_kind="pinned_host")
    device = NamedSharding(mesh, PartitionSpec(), memory_kind="device")

    def step(x, table):
        return x * 2, jax.device_put(x, host), table

    jitted = jax.jit(step, in_shardings=(device, host), out_shardings=(device, device, host))
    arg = jax.ShapeDtypeStruct((8,), np.float32)
    text = with_host_output(module_text(jax_compat.lower_for_platform(jitted, (arg, arg), {}, "tpu")), 1)
    assert '"pinned_host"' in text
    stripped = without_offload(text)
    assert '"pinned_host"' not in stripped and '"unpinned_host"' not in stripped
    assert stripped.count('"device"') > text.count('"device"')


CHIP = Path(__file__).resolve().parents[1] / "chip"
DONATION = json.loads((CHIP / "donation_record.json").read_text())


def _donation_cases():
    spec = importlib.util.spec_from_file_location("donation_cases", CHIP / "donation_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = _donation_cases()


@pytest.mark.skipif(not hasattr(jax, "memory"), reason="the cases move values with jax.memory.Space (JAX >= 0.10)")
@pytest.mark.parametrize("name", sorted(CASES.CASES))
def test_a_fix_that_gives_a_donated_host_buffer_to_a_device_output_is_refused_as_the_chip_aborts_it(name):
    """The chip ran each case three times, each in a process of its own
    (``donation_record.json``): PjRt aborted exactly those whose lowering gives the donated
    ``pinned_host`` buffer to a device output (not each run: it is a race with the program's
    end), and a fix whose lowering does that is refused, with the output named."""
    from offload_fixer.model import FunctionRef
    from offload_fixer.verify.lowering import donation_abort

    namespace: dict = {}
    exec(CASES.HEAD + CASES.CASES[name][0], namespace)
    lowered = jax_compat.lower_for_platform(
        namespace["f"], eval(CASES.ARGS, namespace), {}, jax_compat.lowering_platform("tpu")
    )
    why = donation_abort(lowered, FunctionRef("f"))
    aborted_on_the_chip = any(code < 0 for code in DONATION["runs"][name]["returncodes"])
    assert (why is not None) == aborted_on_the_chip == CASES.CASES[name][1], (why, DONATION["runs"][name])
    if why is not None:
        assert "would abort when it runs" in why and "output result[0], in device memory" in why, why


def test_the_donation_record_was_made_on_the_chip():
    versions = DONATION["versions"]
    assert versions["platform"] == "tpu" and versions["device_kind"] == "TPU v5 lite", versions
    assert set(CASES.CASES) <= set(DONATION["runs"])
