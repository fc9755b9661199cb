"""The code outside any jit: what the check reports of eager operations on arrays in host memory,
as ``run`` reports them (``tests/static_vs_dynamic/eager_*.py`` holds the two side by side)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from offload_fixer.static import check_source
from offload_fixer.static.candidates import eager_candidates, opaque_classes
from offload_fixer.static.project import Project
from offload_fixer.static.pruning import pruned_pieces, reached_tests

from .helpers import LEGACY, PROPAGATION, TYPED
from .test_candidates import assert_same_as_whole, facts_of

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "static_vs_dynamic"

HEADER = """\
import jax
import jax.numpy as jnp

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
DEVICE = HOST.with_memory_kind("device")
"""


def reported(body: str, version: str = TYPED, header: bool = True) -> list[tuple[int, str, str]]:
    """``(line, code, function)`` of every diagnostic, the header's lines not counted."""
    source = (HEADER if header else "") + textwrap.dedent(body)
    result = check_source(source, "prog.py", jax_version=version)
    assert result.parse_error is None, result.parse_error
    offset = HEADER.count("\n") if header else 0
    return sorted((d.location.line - offset, d.code, d.function.name) for d in result.diagnostics)


def corpus(name: str, version: str = TYPED) -> list[tuple[int, str]]:
    path = CORPUS / name
    result = check_source(path.read_text(encoding="utf-8"), str(path), jax_version=version)
    return sorted((d.location.line, d.code) for d in result.diagnostics)


def test_an_eager_operation_on_a_host_array_computes_on_the_host():
    assert reported(
        """
        buffer = jax.device_put(jnp.ones((4, 8)), HOST)
        scaled = buffer * 2
        flat = buffer.reshape(-1)
        total = scaled.sum()
        """
    ) == [(3, "OFL1201", "multiply (eager)"), (5, "OFL1201", "sum (eager)")]  # a reshape stays on host


def test_before_0_7_1_every_eager_result_is_declared_device_memory():
    body = """
        buffer = jax.device_put(jnp.ones((4, 8)), HOST)
        flat = buffer.reshape(-1)
        scaled = buffer * 2
        again = scaled * 2
        """
    for version in (LEGACY, PROPAGATION):
        assert reported(body, version) == [
            (3, "OFL1200", "reshape (eager)"),
            (4, "OFL1200", "multiply (eager)"),
            (4, "OFL1201", "multiply (eager)"),
        ]  # the multiply's result is device memory: the next one is not reported


def test_an_eager_operation_on_scalars_alone_or_a_mean_is_declared_device_memory():
    """JAX >= 0.7.1 compares the memory of operands with a dimension only: an operation on a
    host scalar (a full reduction's result) gives a device result, as ``jnp.mean``'s own
    division does (``eager_norm_of_host_moments.py``, ``eager_mean_of_host_buffer.py``)."""
    assert corpus("eager_norm_of_host_moments.py") == [
        (25, "OFL1200"),
        (25, "OFL1201"),
        (25, "OFL1201"),
        (25, "OFL1201"),
    ]
    assert corpus("eager_mean_of_host_buffer.py") == [(14, "OFL1200"), (14, "OFL1201")]


def test_the_data_of_a_shard_of_a_host_array_is_typed_device_memory():
    """The pattern tunix fixed in "Fingerprint optimizer updates before host offload": an
    optimizer state moved to pinned_host by a helper (``with_memory_kind`` of each leaf's own
    sharding, under ``isinstance`` and memory-kind tests), then sampled shard by shard."""
    assert corpus("eager_fingerprint_offloaded_shards.py") == [(32, "OFL1200")]
    # An array on one device is its own shard: its data keeps the array's type.
    assert (
        reported(
            """
            buffer = jax.device_put(jnp.ones((4, 8)), HOST)
            for shard in buffer.addressable_shards:
                flat = shard.data.reshape(-1)
            """
        )
        == []
    )


def test_a_strided_slice_of_a_host_array_on_one_device_is_the_copy_no_compiler_builds():
    assert corpus("eager_strided_rows_of_host_array.py") == [(14, "OFL1213")]
    assert corpus("eager_strided_columns_of_host_array.py") == [(14, "OFL1213")]
    assert (
        reported(
            """
            buffer = jax.device_put(jnp.ones((16, 8)), HOST)
            rows = buffer[2:6]
            every = buffer[::1]
            """
        )
        == []
    )


def test_jax_refuses_operands_in_host_and_device_memory():
    assert corpus("eager_update_host_moments_with_device_grads.py") == [(15, "OFL1201"), (15, "OFL1215")]
    assert corpus("eager_where_on_host_array.py") == [(15, "OFL1201"), (15, "OFL1215")]
    # Scalars are not compared, and a value of unknown shape is not taken to have a dimension.
    assert reported(
        """
        buffer = jax.device_put(jnp.ones((16, 8)), HOST)
        a = buffer * jnp.float32(2)
        b = jnp.maximum(buffer, 0.0)
        """
    ) == [(3, "OFL1201", "multiply (eager)"), (4, "OFL1201", "maximum (eager)")]
    # Before 0.7.1 JAX compiles it: the result is declared device memory.
    assert reported(
        """
        moments = jax.device_put(jnp.zeros(8), HOST)
        updated = moments + jnp.ones(8)
        """,
        LEGACY,
    ) == [(3, "OFL1200", "add (eager)"), (3, "OFL1201", "add (eager)")]


def test_a_host_array_handed_to_a_jitted_function_is_traced_in_host_memory():
    assert corpus("eager_host_array_to_plain_jit.py") == [(16, "OFL1201"), (20, "OFL1201")]


def test_eager_code_in_functions_runs_from_where_it_is_called():
    """A script's ``main()``, a test function, a method of a test class: the code that runs
    outside any jit. A helper called only inside a jit is traced code, not eager code."""
    body = """
        def stash(x):
            return jax.device_put(x, HOST) * 2

        @jax.jit
        def step(x):
            return jax.device_put(stash(x), DEVICE)

        def main():
            log = stash(jnp.ones(8))

        class OffloadTest:
            def test_stash(self):
                stash(jnp.ones(8))

            def helper(self):
                stash(jnp.ones(8))

        if __name__ == "__main__":
            raise SystemExit(main())
        """
    assert reported(body) == [(3, "OFL1201", "multiply (eager)"), (3, "OFL1201", "step")]


def test_code_a_test_expects_to_raise_is_not_reported():
    """``with pytest.raises(...)``/``self.assertRaises(...)``: the body is meant to stop with an
    exception, as a guard that refuses offloaded state does before any operation on it."""
    body = """
        import pytest

        def test_the_guard_refuses_host_state():
            buffer = jax.device_put(jnp.ones(8), HOST)
            with pytest.raises(ValueError):
                buffer.sum()
            buffer.sum()
        """
    assert reported(body) == [(8, "OFL1201", "sum (eager)")]


def test_a_test_of_the_memory_kind_tells_the_branch():
    """``isinstance(x, jax.Array)`` false: not an array; ``x.sharding.memory_kind ==
    "pinned_host"`` true: in host memory. Each return of a helper that moves only what is not
    there yet is then host memory, and what the caller computes on it is reported."""
    body = """
        def to_host(value, kind="pinned_host"):
            if not isinstance(value, jax.Array):
                return value
            if value.sharding.memory_kind == kind:
                return value
            return jax.device_put(value, value.sharding.with_memory_kind(kind))

        state = jax.tree.map(to_host, {"mu": jnp.ones(8)})
        norm = jnp.sum(state["mu"])
        """
    (finding,) = reported(body)
    assert finding == (10, "OFL1201", "sum (eager)")
    source = HEADER + textwrap.dedent(body)
    (diagnostic,) = check_source(source, "prog.py", jax_version=TYPED).diagnostics
    assert diagnostic.origin.span.line == HEADER.count("\n") + 7  # the move, not the test of the kind


def test_a_file_that_spells_a_host_kind_without_a_jit_is_checked():
    source = (
        "import jax\nimport jax.numpy as jnp\n\nx = jax.device_put(jnp.ones(8), jax.memory.Space.Host)\ny = x + 1\n"
    )
    (diagnostic,) = check_source(source, "prog.py", jax_version=TYPED).diagnostics
    assert (diagnostic.code, diagnostic.location.line, diagnostic.function.name) == ("OFL1201", 5, "add (eager)")


TEST_CASES = """\
import jax
import jax.numpy as jnp
from absl.testing import absltest

HOST = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


def offload(x):
    return jax.device_put(x, HOST)


class OffloadTest(absltest.TestCase):
    def setUp(self):
        self.values = jnp.ones(8)

    def _double(self, x):
        return x * 2

    def test_plain(self):
        self.assertEqual(self._double(self.values).shape, (8,))

    def test_scales_what_it_offloads(self):
        moved = offload(jnp.ones(8))
        return moved * 2

    def test_sums_a_host_buffer(self):
        buffer = jax.device_put(jnp.ones(8), jax.memory.Space.Host)
        return buffer.sum()


class TestPlacement:
    PLACE = HOST

    def test_plain(self):
        return jnp.ones(8) * 2

    def test_moves_to_its_place(self):
        buffer = jax.device_put(jnp.ones(8), TestPlacement().PLACE)
        return buffer * 2
"""


def test_only_the_test_methods_a_host_value_reaches_run_and_are_parsed():
    """A test runner calls each test method with an instance the check knows nothing of, so a
    host value reaches one only through what it spells or reads at module level (its own
    class included, which the check knows when it is a plain class). A test case's class is
    read for nothing else: every other method of it is blanked, never parsed."""
    facts = facts_of(TEST_CASES)
    eager = eager_candidates(facts, None, "m.py")
    tests = reached_tests(facts, None, "m.py", eager)
    offload_test, placement = (i for i in eager if facts.class_shape(i) is not None)
    assert tests == {
        offload_test: {"test_scales_what_it_offloads", "test_sums_a_host_buffer"},
        placement: {"test_moves_to_its_place"},
    }
    assert opaque_classes(facts, None, "m.py", eager) == {offload_test}  # a plain class's value is known
    pruned = pruned_pieces(facts, None, "m.py", eager, {offload_test: tests[offload_test]})
    assert [line.split("(")[0].strip() for line in pruned[offload_test].splitlines() if "def " in line] == [
        "def test_scales_what_it_offloads",
        "def test_sums_a_host_buffer",
    ]
    assert pruned[offload_test].count("\n") == facts.piece(offload_test).count("\n")  # lines kept in place
    assert_same_as_whole(TEST_CASES)
    found = check_source(TEST_CASES, "m.py", jax_version=TYPED).diagnostics
    assert sorted((d.location.line, d.code, d.function.name) for d in found) == [
        (24, "OFL1201", "multiply (eager)"),
        (28, "OFL1201", "sum (eager)"),
        (39, "OFL1201", "multiply (eager)"),
    ]


def test_a_file_that_names_no_jit_of_jax_is_read_for_its_eager_code_alone(tmp_path):
    """Selected for the host kind it spells, a file that names none of JAX's jits is analysed
    for its code outside any jit, and searched for jit sites no more than the prefilter
    searches a file that names no jit: a decorator the project makes of ``jax.jit`` elsewhere
    is not followed there (the cold check of a tree would otherwise trace every such file)."""
    (tmp_path / "helpers.py").write_text("import functools\nimport jax\n\nfast = functools.partial(jax.jit)\n")
    text = (
        "import jax\nimport jax.numpy as jnp\nfrom helpers import fast\n\n"
        'host = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n\n\n'
        '@fast\ndef step(x):\n    return {"mu": jax.device_put(x, host) * 2}\n\n\n'
        "scaled = jax.device_put(jnp.ones(8), host) * 2\n"
    )
    main = tmp_path / "main.py"
    main.write_text(text)
    (diagnostic,) = check_source(text, str(main), jax_version=TYPED, project=Project()).diagnostics
    assert (diagnostic.location.line, diagnostic.code, diagnostic.function.name) == (13, "OFL1201", "multiply (eager)")
