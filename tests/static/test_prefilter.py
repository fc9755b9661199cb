"""The prefilter only rules out files in which the check could not report anything."""

from __future__ import annotations

import ast

import pytest

from offload_fixer import jax_compat
from offload_fixer.jax_compat import NEWEST_MODELLED
from offload_fixer.static.prefilter import may_hold_host_move, references_jit


@pytest.mark.parametrize(
    "text, expected",
    [
        ("import jax\nf = jax.jit(g)\ns = NamedSharding(m, p, memory_kind='pinned_host')", True),
        ("from jax.memory import Space as S\n@jax.jit\ndef f(x): return jax.device_put(x, S.Host)", True),
        ("@jax.jit\ndef f(x): return jax.device_put(x, unpinned)  # 'unpinned_host'", True),
        ("@jax.jit\ndef f(x): return jax.device_put(x, is_host)", False),
        ("@jax.jit\ndef f(x): return jax.device_put(x, s)", False),  # no host spelling
        ("s = NamedSharding(m, p, memory_kind='pinned_host')", False),  # no jit
        ("@jax.jit\ndef f(x): return x.HostTensors(x.Hosts)", False),  # other names than .Host
        ("@jax.jit\ndef f(x): return jax.device_put(x, jax.memory.Space.Host)", True),
        ("", False),
        # remat offload policies and compute_on offload whatever spells the destination
        ("@jax.jit\ndef f(x): return jax.checkpoint(g, policy=cp.save_and_offload_only_these_names(**cfg))(x)", True),
        ("@jax.jit\ndef f(x): return jax.checkpoint(g, policy=cp.offload_dot_with_no_batch_dims(*cfg))(x)", True),
        ("policy = cp.offload_dot_with_no_batch_dims('device', 'unpinned_host')", True),  # checked without jit
        ("policy = cp.offload_dot_with_no_batch_dims('device', cfg.dst)", False),  # nothing to decide
        ("@jax.jit\ndef f(x):\n    with compute_on('device_host'):\n        return x * 2", True),
        # jit as a word: the name of every jit JAX has, and any way of naming one spells it
        ("from jax import jit as compile_it\nf = compile_it(lambda x: jax.device_put(x, host))  # pinned_host", True),
        ("f = getattr(jax, 'jit')(g)\ns = NamedSharding(m, p, memory_kind='pinned_host')", True),
        ("from jax.experimental.pjit import pjit\ns = NamedSharding(m, p, memory_kind='pinned_host')", True),
        ("f = jitted(g)\ng = _jit(h)\ns = NamedSharding(m, p, memory_kind='pinned_host')", False),
        ("# jitting is slow\ns = NamedSharding(m, p, memory_kind='pinned_host')", False),
    ],
)
def test_text_markers(text, expected):
    assert may_hold_host_move(text) is expected
    assert may_hold_host_move(text.encode()) is expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("import jax\njax.jit(f)", True),
        ("import jax as J\n@J.jit\ndef f(): pass", True),
        ("from jax import jit as compile_it\ncompile_it(f)", True),
        ("from functools import partial\nimport jax\npartial(jax.jit, static_argnums=0)", True),
        ("from jax.experimental.pjit import pjit\npjit(f)", True),
        ("def build():\n    import jax\n    return jax.jit(f)", True),
        # JAX's own modules reach jit through private paths the check never treats as jit sites
        ("from jax._src import api\napi.jit(f)", False),
        ("from jax._src.api import jit\njit(f)", False),
        ("jit = 1\nx.jit(f)", False),
    ],
)
def test_jit_references(text, expected):
    assert references_jit(ast.parse(text)) is expected


@pytest.mark.parametrize(
    "version", ["0.4.20", "0.4.26", "0.4.29", "0.6.2", "0.7.1", "0.10.2", "0.11.1", NEWEST_MODELLED]
)
def test_every_host_spelling_jax_compat_produces_passes_the_text_prefilter(version):
    """The prefilter's pattern is made from ``jax_compat``'s spellings: whatever a version
    spells a host move with (its host memory kind, the memory-space member, the compute_on
    wrapper's output spaces), through an alias too, a jitted file holding it is parsed."""
    spelling = jax_compat.spelling(version)
    written = [f"memory_kind={spelling.host_kind!r}", f"TransferToMemoryKind({spelling.host_kind!r})"]
    if spelling.memory_space is not None:
        space = spelling.memory_space.host
        written += [space, f"Space{space[space.rindex('.') :]}", f"mem.Space{space[space.rindex('.') :]}"]
    if spelling.host_compute is jax_compat.HostCompute.FUNCTION:
        written.append(spelling.host_compute.value)
    for text in written:
        source = f"import jax\n\n@jax.jit\ndef f(x):\n    return jax.device_put(x, {text})\n"
        assert may_hold_host_move(source) and may_hold_host_move(source.encode()), text


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"offload",
        b"policy = save_and_offload_only_these_names(...)",
        b"jax.checkpoint_policies.offload_dot_with_no_batch_dims('device', 'pinned_host')",
        b"x: Offloadable = None",
        b"with compute_on('device_host'):",
        b"compute_o n; save_and_offload_only_these_name; Offloadabl",
        b"ffload compute_onx",
    ],
)
def test_offload_spellings_are_found_as_the_expression_finds_them(text):
    from offload_fixer.static.prefilter import OFFLOAD_SPELLING, spells_offload

    assert spells_offload(text) == (OFFLOAD_SPELLING.search(text) is not None)


@pytest.mark.parametrize(
    "text",
    [b"jit", b"pjit", b"xpjit", b"ppjit", b"_jit", b"jit_", b"jitted", b"a.jit(", b"p jit", b"pjitx", b"\xc3\xa9jit"]
    + [b"jax.pjit", b"jitjit", b"(jit)", b"jit2", b"jitted = 1; f = jax.jit(g)", b"", b"pj", b"ji"],
)
def test_jit_as_a_word_is_what_the_word_boundary_expression_finds(text):
    import re

    from offload_fixer.static.prefilter import spells_jit

    assert spells_jit(text) is (re.search(rb"\bp?jit\b", text) is not None)


HOST_KIND_WORDS = r"\b(?:un)?pinned_host\b|\.Host\b"
"""What :func:`host_kinds_in` counts, as the expression it replaced spells it."""


@pytest.mark.parametrize(
    "text",
    [
        '"pinned_host"',
        "'unpinned_host'",
        "enable_pinned_host_transfer",
        "xunpinned_host",
        "re_unpinned_host",
        "un pinned_host",
        "unpinned_host_",
        "pinned_hostname",
        "épinned_host",
        "pinned_host",
        "un",
        "npinned_host",
        "jax.memory.Space.Host",
        "x.Hostname",
        ".Host_",
        ".Host",
        'f"{kind}pinned_host"; memory_kind="pinned_host", space=Space.Host',
        "",
    ],
)
def test_host_kinds_are_counted_as_the_word_boundary_expression_counts_them(text):
    import re

    from offload_fixer.static.prefilter import host_kinds_in

    assert host_kinds_in(text) == len(re.findall(HOST_KIND_WORDS, text))


def test_host_kinds_are_counted_alike_over_the_package_and_its_tests():
    import re
    from pathlib import Path

    from offload_fixer.static.prefilter import host_kinds_in

    root = Path(__file__).resolve().parents[2]
    texts = [
        path.read_text(encoding="utf-8")
        for folder in ("offload_fixer", "tests", "examples")
        for path in (root / folder).rglob("*.py")
    ]
    assert sum(host_kinds_in(text) for text in texts) > 500
    for text in texts:
        assert host_kinds_in(text) == len(re.findall(HOST_KIND_WORDS, text))
