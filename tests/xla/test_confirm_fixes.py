"""The pieces of a fix's verification that need no compiler: which files may be imported to
lower a fix, recorded arguments rebuilt on the fixed module's classes, and how a fix's memory
figures read."""

import dataclasses
import types
from typing import NamedTuple

import jax
import numpy as np

from offload_fixer.model import MemoryFigures
from offload_fixer.xla.confirm_fixes import describe_memory, import_safe, rehome


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


def test_memory_figures_read_as_the_change_in_hbm_and_what_host_keeps():
    before = MemoryFigures(argument=4 << 20, output=1 << 10, temp=0, host_argument=2 << 30)
    after = MemoryFigures(argument=4 << 20, output=1 << 10, temp=4 << 20, host_argument=2 << 30)
    assert describe_memory(before, after) == "HBM +4.0 MiB (temporaries), host 2.0 GiB kept"
    assert describe_memory(None, after) == "HBM 8.0 MiB, host 2.0 GiB"
    smaller = MemoryFigures(argument=4 << 20, output=1 << 10, temp=0, host_argument=1 << 30)
    assert describe_memory(after, smaller) == "HBM -4.0 MiB (temporaries), host -1.0 GiB (now 1.0 GiB)"
