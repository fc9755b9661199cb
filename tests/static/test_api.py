"""The public API: Diagnostic fields the fix planner consumes, targets, unreadable files, paths."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap

import pytest

from offload_fixer.model import Diagnostic
from offload_fixer.static import ParseError, StaticResult, check_paths, check_source
from offload_fixer.static.api import BYTES_PER_WORKER, available_cores, worker_count

from .helpers import LEGACY, PROPAGATION, TYPED, diagnostics, flow

SOURCE = textwrap.dedent("""\
    import jax
    from functools import partial
    from jax.sharding import NamedSharding, PartitionSpec as P

    host = NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="pinned_host")


    @partial(jax.jit, donate_argnums=0)
    def step(params, x):
        moved = jax.device_put(params, host)
        return x, {"mu": moved * 2, "nu": moved}
""")


def test_diagnostic_locates_function_origin_output_and_return():
    (d,) = flow(check_source(SOURCE, "train.py", jax_version=PROPAGATION))
    assert d.code == "OFL1200" and d.severity == "error" and d.target == "tpu" and d.source == "static"
    assert (d.function.name, d.function.path, d.function.line) == ("step", "train.py", 9)  # the `def`
    assert d.origin.kind == "move_to_host" and d.origin.memory_kind == "pinned_host"
    assert (d.origin.span.line, d.origin.span.col, d.origin.span.end_line, d.origin.span.end_col) == (10, 13, 10, 41)
    assert d.span == d.origin.span
    assert d.output_path == "[1]['mu']"
    assert (d.return_span.line, d.return_span.col, d.return_span.end_col) == (11, 12, 45)
    assert [(s.op, s.role) for s in d.trace] == [
        ("device_put", "move to host"),
        ("multiply", "host compute"),
        ("return", "output"),
    ]
    assert d.trace[1].span.line == 11
    assert "0.4.29-0.7.0" in d.explanation and "`multiply`" in d.explanation


def test_related_outputs_share_one_origin():
    found = flow(check_source(SOURCE, "train.py", jax_version=LEGACY))
    assert sorted(d.output_path for d in found) == ["[1]['mu']", "[1]['nu']"]
    by_path = {d.output_path: d for d in found}
    assert by_path["[1]['mu']"].related_outputs == ("[1]['nu']",)
    assert by_path["[1]['mu']"].origin.key == by_path["[1]['nu']"].origin.key == "train.py:10:13"


def test_diagnostics_round_trip_through_json():
    for d in flow(check_source(SOURCE, "train.py", jax_version=LEGACY)):
        assert Diagnostic.from_dict(d.to_dict()) == d


@pytest.mark.parametrize("target, named", [("tpu", "tpu"), ("gpu", "gpu"), ("gpu-legacy", "gpu")])
def test_both_targets_fail_on_error_1200(target, named):
    """``gpu-legacy`` (an older XLA:GPU that failed like TPU) is now just ``gpu``."""
    (d,) = flow(check_source(SOURCE, "train.py", target=target, jax_version=PROPAGATION))
    assert (d.target, d.severity) == (named, "error")


def test_unknown_target_or_version_is_refused():
    with pytest.raises(ValueError, match="unknown target"):
        check_source(SOURCE, "train.py", target="cpu")
    with pytest.raises(ValueError, match="not a JAX version"):
        check_source(SOURCE, "train.py", jax_version="latest")


def test_fix_options_are_spelled_for_the_version():
    (d,) = diagnostics("@jax.jit\ndef f(x):\n    return jax.device_put(x, host) * 2\n", version=PROPAGATION)
    assert [f.strategy for f in d.fixes] == ["device", "host"]
    assert "with_memory_kind('device')" in d.fixes[0].description
    assert "memory_kind='pinned_host'" in d.fixes[1].description
    assert d.fixes[1].safety == "unsafe"

    (d,) = diagnostics("@partial(jax.jit, in_shardings=host)\ndef f(x):\n    return x * 2\n", version=TYPED)
    assert d.origin.kind == "host_argument"
    assert (d.origin.detail, d.origin.argument) == ("argument x declared pinned_host (in_shardings)", "x")
    assert [f.strategy for f in d.fixes] == ["host", "device"]  # device_put may be elided here
    assert "jax.memory.Space.Device" in d.fixes[1].description


def test_host_argument_origin_is_the_in_shardings_argument_and_its_leaf():
    (d,) = diagnostics("@partial(jax.jit, in_shardings=(None, host))\ndef f(a, b):\n    return b + a\n", version=LEGACY)
    decorator = "@partial(jax.jit, in_shardings=(None, host))"
    assert d.origin.kind == "host_argument" and d.origin.argument == "b"
    # Where the dynamic analysis points too: the jit site's ``in_shardings=``, named after ``f``.
    assert (d.origin.span.col, d.origin.span.end_col) == (decorator.index("in_") + 1, len(decorator))
    assert d.origin.span.function == "f" and d.span == d.origin.span
    assert d.trace[0].op == "in_shardings"
    assert d.trace[0].span.col == decorator.index("host") + 1  # the leaf that says host
    assert d.function.line == d.origin.span.line + 1


def test_in_shardings_given_by_position():
    (d,) = diagnostics("def f(a, b):\n    return b + a\ng = jax.jit(f, (None, host))\n", version=LEGACY)
    assert d.origin.argument == "b" and d.origin.span.line == d.function.line + 2


def test_host_argument_leaves_are_labelled_as_jax_does():
    (d,) = diagnostics(
        "@partial(jax.jit, in_shardings=({'mu': host, 'nu': None},))\ndef f(opt):\n    return opt['mu'] * 2\n",
        version=PROPAGATION,
    )
    assert d.origin.argument == "opt['mu']"
    assert d.origin.key.endswith(":opt['mu']")


def test_unparsable_file_is_reported_with_line_and_column():
    source = "import jax\nhost = 'pinned_host'\n@jax.jit\ndef f(x):\n    return (x +\n"
    result = check_source(source, "broken.py")
    assert flow(result) == ()
    assert result.parse_error == ParseError("broken.py", 5, 12, "'(' was never closed")


def test_syntax_newer_than_this_python_is_still_checked():
    source = SOURCE + "\ntype Params = dict[str, jax.Array]\n"  # Python 3.12 syntax
    result = check_source(source, "new.py", jax_version=LEGACY)
    assert result.parse_error is None and len(flow(result)) == 2


def test_non_utf8_file_is_reported_and_a_coding_cookie_is_honoured():
    body = "import jax\n# caf\xe9\nhost = 'pinned_host'\nf = jax.jit(g)\n"
    result = check_source(body.encode("latin-1"), "latin.py")
    assert result.parse_error is not None
    assert (result.parse_error.line, result.parse_error.col) == (2, 6)
    assert "utf-8" in result.parse_error.message

    declared = ("# -*- coding: latin-1 -*-\n" + SOURCE.replace("# ", "") + "# caf\xe9\n").encode("latin-1")
    result = check_source(declared, "latin.py", jax_version=LEGACY)
    assert result.parse_error is None and len(flow(result)) == 2


def test_unknown_encoding_cookie_is_reported():
    result = check_source(b"# -*- coding: klingon -*-\nimport jax\nf = jax.jit(g)  # pinned_host\n", "k.py")
    assert result.parse_error == ParseError("k.py", 1, 1, "unknown encoding: klingon")


def test_bytes_with_a_bom_are_checked():
    result = check_source(b"\xef\xbb\xbf" + SOURCE.encode(), "bom.py", jax_version=LEGACY)
    assert result.parse_error is None and len(flow(result)) == 2


def test_files_that_cannot_hold_a_host_move_are_not_parsed():
    result = check_source("this is not python (", "other.py")
    assert result == StaticResult("other.py")  # no markers: skipped, not analysed


def test_check_paths_walks_directories(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SOURCE)
    (tmp_path / "pkg" / "plain.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "broken.py").write_text("import jax\nhost = 'pinned_host'\n@jax.jit\ndef f(:\n")
    (tmp_path / "pkg" / "notes.txt").write_text(SOURCE)
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "gen.py").write_text(SOURCE)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "lib.py").write_text(SOURCE)
    (tmp_path / "skip_me.py").write_text(SOURCE)
    (tmp_path / ".gitignore").write_text("generated/\n")

    results = list(check_paths([str(tmp_path)], jax_version=LEGACY, excludes=["skip_*.py"]))
    by_name = {r.path[len(str(tmp_path)) + 1 :]: r for r in results}
    assert sorted(by_name) == ["pkg/broken.py", "pkg/plain.py", "pkg/train.py"]
    assert len(flow(by_name["pkg/train.py"])) == 2
    assert (by_name["pkg/broken.py"].parse_error.line, by_name["pkg/broken.py"].parse_error.col) == (4, 7)
    assert not by_name["pkg/plain.py"].analysed

    explicit = list(check_paths([str(tmp_path / "generated" / "gen.py")], jax_version=LEGACY))
    assert len(flow(explicit[0])) == 2


def test_parallel_check_gives_the_same_results(tmp_path):
    for i in range(4):
        (tmp_path / f"m{i}.py").write_text(SOURCE.replace("def step", f"def step{i}"))
    (tmp_path / "bad.py").write_text("import jax\nhost = 'pinned_host'\n@jax.jit\ndef f(:\n")
    serial = list(check_paths([str(tmp_path)], jax_version=LEGACY))
    parallel = list(check_paths([str(tmp_path)], jax_version=LEGACY, jobs=2))
    assert serial == parallel
    assert sum(len(flow(r)) for r in parallel) == 8


def test_checking_again_with_the_caches_parses_only_the_changed_statements(tmp_path):
    """What ``check --fix`` does: check, fix one statement, check again with the same caches."""
    path = tmp_path / "step.py"
    path.write_text(SOURCE + "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(20)))
    caches: dict = {}
    (first,) = check_paths([str(path)], jax_version=LEGACY, caches=caches)
    parsed = caches[str(path)].parsed
    path.write_text(path.read_text().replace("moved * 2", "moved * 3"))
    (again,) = check_paths([str(path)], jax_version=LEGACY, caches=caches)
    assert caches[str(path)].parsed == parsed + 1
    assert again == next(iter(check_paths([str(path)], jax_version=LEGACY))) and flow(again)
    assert [d.code for d in flow(again)] == [d.code for d in flow(first)]


def test_a_named_file_is_parsed_even_when_the_prefilter_rules_it_out(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    (walked,) = check_paths([str(broken)])
    assert walked.parse_error is None  # nothing there can hold a host move: not parsed
    (named,) = check_paths([str(broken)], check_syntax={str(broken)})
    assert (named.parse_error.line, named.parse_error.col) == (1, 7)
    assert check_source("def f(:\n", "stdin.py", require_syntax=True).parse_error.line == 1
    assert check_source("x = 1\n", "stdin.py", require_syntax=True).parse_error is None


@pytest.mark.parametrize(
    "jobs, files, size, cores, expected",
    [
        (None, 5, 290_000, 8, 1),  # jax, flax and optax: five files reach the parser, one process is faster
        (0, 200, 3 * BYTES_PER_WORKER, 8, 3),  # one process per BYTES_PER_WORKER of source to parse
        (0, 200, 3 * BYTES_PER_WORKER, 2, 2),  # at most one per core
        (None, 200, 30 * BYTES_PER_WORKER, 1, 1),  # one core: no pool
        (None, 1, 10 * BYTES_PER_WORKER, 8, 1),  # one file: nothing to share
        (4, 3, 100, 8, 3),  # an explicit -j is a cap, not a demand
        (16, 100, 100, 4, 4),  # ... capped by the cores, as a project's `jobs = 16` is
        (1, 100, 10 * BYTES_PER_WORKER, 8, 1),
    ],
)
def test_a_pool_only_for_enough_source_and_never_more_than_the_cores(monkeypatch, jobs, files, size, cores, expected):
    monkeypatch.setattr("offload_fixer.static.api.available_cores", lambda: cores)
    assert worker_count(jobs, files, size) == expected


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_the_cores_are_the_ones_this_process_may_run_on():
    assert available_cores() == len(os.sched_getaffinity(0))
    one = next(iter(os.sched_getaffinity(0)))
    script = (
        f"import os; os.sched_setaffinity(0, {{{one}}}); "
        "from offload_fixer.static.api import worker_count; print(worker_count(8, 100, 100))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "1"  # -j 8 on a process pinned to one core: one process


def test_unreadable_path_is_reported(tmp_path):
    (result,) = check_paths([str(tmp_path / "missing.py")])
    assert result.parse_error is not None and "cannot read" in result.parse_error.message


def test_spans_name_the_function_that_contains_them():
    source = SOURCE + textwrap.dedent("""

        def offload(v):
            return jax.device_put(v, host)


        @partial(jax.jit, in_shardings=(host,))
        def outer(x):
            return offload(x) * 2, x + 1
    """)
    found = flow(check_source(source, "train.py", jax_version=LEGACY))
    by_path = {(d.function.name, d.output_path): d for d in found}
    moved = by_path[("outer", "[0]")]
    assert moved.origin.span.function == "offload"
    assert moved.return_span.function == "outer"
    argument = by_path[("outer", "[1]")]
    assert argument.origin.kind == "host_argument" and argument.origin.span.function == "outer"
    assert argument.trace[0].span.function is None  # the decorator, outside any function


def test_unpinned_host_gets_the_companion_diagnostic_of_the_dynamic_analysis():
    body = """
    auto = NamedSharding(jax.sharding.Mesh(jax.devices(), ("x",)), P(), memory_kind="unpinned_host")

    @jax.jit
    def f(x):
        u = jax.device_put(x, auto)
        return u, u * 2
    """
    found = diagnostics(body, version=TYPED, target="gpu")
    assert sorted((d.code, d.output_path) for d in found) == [("OFL1200", "[0]"), ("OFL1200", "[1]"), ("OFL1204", None)]
    (companion,) = [d for d in found if d.code == "OFL1204"]
    assert companion.severity == "warning" and companion.origin.memory_kind == "unpinned_host"
    assert [(f.strategy, f.safety) for f in companion.fixes] == [("host", "safe")]
    assert companion.origin.key == found[0].origin.key


def test_source_hash_lets_a_fix_refuse_a_changed_file(tmp_path):
    data = SOURCE.encode()
    for d in flow(check_source(data, "train.py", jax_version=LEGACY)):
        assert d.source_sha256 == hashlib.sha256(data).hexdigest()
    (tmp_path / "train.py").write_bytes(data)
    (result,) = check_paths([str(tmp_path)], jax_version=LEGACY)
    assert {d.source_sha256 for d in flow(result)} == {hashlib.sha256(data).hexdigest()}


def test_each_file_takes_its_own_packages_settings(tmp_path):
    from offload_fixer.config import SettingsResolver

    for package, version in (("a", LEGACY), ("b", "0.10.2")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "pyproject.toml").write_text(
            f'[tool.offload-fixer]\njax-version = "{version}"\nextend-exclude = ["skipped.py"]\n'
        )
        (tmp_path / package / "train.py").write_text(SOURCE)
        (tmp_path / package / "skipped.py").write_text(SOURCE)
    resolver = SettingsResolver()
    results = {
        os.path.relpath(r.path, tmp_path): r
        for r in check_paths(
            [str(tmp_path / "b"), str(tmp_path / "a"), str(tmp_path / "a" / "skipped.py")],
            settings_for=resolver.settings_for,
        )
    }
    assert sorted(results) == ["a/skipped.py", "a/train.py", "b/train.py"]  # named files are never excluded
    assert len(flow(results["a/train.py"])) == 2  # 0.4.26's rules
    assert flow(results["b/train.py"]) == ()  # 0.10.2: the output follows the host value


def test_files_the_prefilter_drops_are_still_checked_as_text(tmp_path):
    (tmp_path / "u16.py").write_bytes("x = 1\n".encode("utf-16"))
    (tmp_path / "blob.py").write_bytes(b"\x00\x01\xff")
    (tmp_path / "syntax.py").write_text("x = (\n")
    walked = {os.path.basename(r.path): r.parse_error for r in check_paths([str(tmp_path)])}
    assert "UTF-16" in walked["u16.py"].message and "NUL" in walked["blob.py"].message
    # compiling every file costs five times the whole check: a walked file is decoded, a named one compiled too
    assert walked["syntax.py"] is None
    (named,) = check_paths([str(tmp_path / "syntax.py")], check_syntax={str(tmp_path / "syntax.py")})
    assert named.parse_error.message == "'(' was never closed"


@pytest.mark.parametrize(
    "expression",
    [" + ".join(["x"] * 350), "f(" * 150 + "x" + ")" * 150, "x" + ".real" * 400],
    ids=["sum-of-350", "calls-150-deep", "attributes-400"],
)
def test_deep_expressions_are_analysed(expression):
    body = (
        SOURCE
        + f"\n\ndef f(v):\n    return v\n\n\n@jax.jit\ndef deep(x):\n    y = {expression}\n    return y, jax.device_put(x, host)\n"
    )
    result = check_source(body, "deep.py", jax_version=LEGACY)
    assert result.parse_error is None
    assert "deep" in {d.function.name for d in flow(result) if d.function}


def test_what_cpython_cannot_compile_is_a_file_error():
    result = check_source(SOURCE + "\ny = " + "(" * 250 + "1" + ")" * 250 + "\n", "p.py", jax_version=LEGACY)
    assert result.parse_error is not None and result.parse_error.message == "too many nested parentheses"
    assert flow(result) == ()


def test_a_module_whose_only_offload_is_a_remat_policy_is_analysed(tmp_path):
    """maxtext's layers build the policy; another module jits the model. No jit here, and
    the destination is checked where it is written."""
    layers = tmp_path / "layers.py"
    layers.write_text(
        textwrap.dedent("""\
            import jax
            from jax import checkpoint_policies as cp


            def remat(layer):
                policy = cp.save_and_offload_only_these_names(
                    names_which_can_be_saved=[],
                    names_which_can_be_offloaded=["attn_out"],
                    offload_src="device",
                    offload_dst="unpinned_host",
                )
                dots = cp.offload_dot_with_no_batch_dims("device", "unpinned_host")
                return jax.checkpoint(layer, policy=policy), dots
            """)
    )
    (result,) = check_paths([str(tmp_path)])
    assert result.analysed
    assert [(d.code, d.span.line) for d in flow(result)] == [("OFL1204", 10), ("OFL1204", 12)]


def test_a_failure_while_selecting_one_file_is_that_files_note(tmp_path, monkeypatch):
    """A bug in the prefilter's reading of one file's imports is an internal-error note for that
    file; every other file is still checked and its findings reported."""
    from offload_fixer.static.project import Project

    selects = Project.selects

    def failing(self, path, data):
        if path.endswith("crashes.py"):
            raise ValueError("an import the scanner cannot read")
        return selects(self, path, data)

    monkeypatch.setattr(Project, "selects", failing)
    body = "import jax\n\n\n@jax.jit\ndef f(x):\n    return jax.device_put(x, jax.memory.Space.Host) * 2\n"
    for name in ("crashes.py", "fine.py"):
        (tmp_path / name).write_text(body)
    results = {os.path.basename(r.path): r for r in check_paths([str(tmp_path)], jobs=1)}
    assert "ValueError: an import the scanner cannot read" in (results["crashes.py"].internal_error or "")
    assert not results["crashes.py"].diagnostics
    assert results["fine.py"].internal_error is None and results["fine.py"].diagnostics
    assert results["fine.py"].diagnostics == check_source(body, str(tmp_path / "fine.py")).diagnostics
