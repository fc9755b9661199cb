"""Locations decode the same through jaxlib's typed classes and through the printed-form parser."""

import jax
import jax.numpy as jnp
import pytest

from offload_fixer import jax_compat
from offload_fixer.ir.locations import Frame, decode, parse_location_text
from offload_fixer.ir.module import load


def _lowered_ops():
    host = jax_compat.memory_move_target("pinned_host")

    def offload(x):
        return jax.device_put(x, host) + 1.0

    lowered = jax.jit(offload).trace(jnp.ones((4,))).lower(lowering_platforms=("tpu",))
    view = load(lowered)
    return view, offload


def test_typed_and_printed_forms_agree_on_every_op():
    view, _ = _lowered_ops()
    from offload_fixer.ir.module import walk_operations

    for op in walk_operations(view.main):
        assert decode(op.location) == parse_location_text(str(op.location))


def test_move_to_host_points_at_the_user_line():
    view, offload = _lowered_ops()
    (move,) = view.placements
    location = decode(move.location)
    assert location.primitive == "device_put"
    first = location.frames[0]
    assert first.path == __file__
    assert first.function == offload.__qualname__  # JAX records qualified names
    assert first.line == offload.__code__.co_firstlineno + 1


@pytest.mark.parametrize(
    "text, name, frames",
    [
        ('loc("x")', "x", ()),
        ("loc(unknown)", None, ()),
        (
            'loc("jit(f)/jit(main)/device_put"(callsite("f"("/a.py":4:11) at "<module>"("/a.py":5:79))))',
            "jit(f)/jit(main)/device_put",
            (Frame("f", "/a.py", 4, 11), Frame("<module>", "/a.py", 5, 79)),
        ),
        (
            'loc("jit(f)/mul"(callsite("f"("/a.py":6:36 to :39) at "<module>"("/a.py":7:6 to 8:2))))',
            "jit(f)/mul",
            (Frame("f", "/a.py", 6, 36, 6, 39), Frame("<module>", "/a.py", 7, 6, 8, 2)),
        ),
        ('loc(fused["a.py":1:2, "b.py":3:4])', None, (Frame(None, "a.py", 1, 2), Frame(None, "b.py", 3, 4))),
        ('loc("name with \\"quote\\""("/a.py":1:1))', None, (Frame('name with "quote"', "/a.py", 1, 1),)),
    ],
)
def test_printed_form_parser(text, name, frames):
    location = parse_location_text(text)
    assert location.name == name
    assert location.frames == frames
