"""Test-wide environment: JAX runs on the CPU, whatever accelerator plugins are installed.

The oracle layer installs libtpu and the CUDA plugin into the test environments; without
``JAX_PLATFORMS=cpu`` every JAX process (the tests' and the programs they run) would try to
start those backends on a machine that has no accelerator. Set before JAX is imported, and
inherited by every subprocess a test starts.

The released compilers are fixtures (``tpu_compiler``, ``gpu_compiler``, ``judge`` for both):
one oracle per target for the whole test process. Where a compiler is not installed the tests
that need it skip with the reason; an environment that must have it (CI names them in
``OFFLOAD_FIXER_REQUIRE_COMPILERS``, e.g. ``tpu,gpu``) fails instead, so a broken install
cannot pass as a skip.
"""

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")


def share_cpu_executables() -> None:
    """One JAX persistent compilation cache for the whole session, in a fresh directory removed
    at its end: the suite runs the same programs in hundreds of processes (the command under
    test, the example programs, the xdist workers), and XLA:CPU compiling each of their jits
    again (0.1 to 0.3 s each) was a large share of its CPU time. Keyed by the module without
    its locations, so a copy of a program in another directory hits too. Only JAX's own
    compiles on the CPU read it: the oracle's compile-only TPU and GPU compiles go straight to
    the compiler's client (``jax_compat.compile_stablehlo``), never through this cache, and the
    XLA caches it would switch on with it (GPU autotuning) stay off.

    Set once, by the first pytest process (the xdist workers and every subprocess inherit
    it); a cache the caller configured is left alone. Entries are written and read under a
    file lock (``filelock``, hence a size limit): processes compiling the same module at once
    never read half an entry."""
    if "JAX_COMPILATION_CACHE_DIR" in os.environ or importlib.util.find_spec("filelock") is None:
        return
    directory = tempfile.mkdtemp(prefix="offload-fixer-tests-jax-cache-")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    os.environ.update(
        JAX_COMPILATION_CACHE_DIR=directory,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_COMPILATION_CACHE_MAX_SIZE=str(4 << 30),
        JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="none",
    )


share_cpu_executables()

REQUIRED = {t for t in os.environ.get("OFFLOAD_FIXER_REQUIRE_COMPILERS", "").split(",") if t}


def compiler(target: str):
    from offload_fixer import xla

    oracle = xla.oracle(target)
    try:
        oracle.start()
    except xla.CompilerUnavailable as exc:
        if target in REQUIRED:
            pytest.fail(f"this environment must have the {target} compiler: {exc}")
        pytest.skip(str(exc))
    return oracle


@pytest.fixture(scope="session")
def tpu_compiler():
    return compiler("tpu")


@pytest.fixture(scope="session")
def gpu_compiler():
    return compiler("gpu")


@pytest.fixture(params=["tpu", "gpu"])
def judge(request):
    return request.getfixturevalue(f"{request.param}_compiler")


@pytest.fixture(autouse=True)
def xla_flags_left_as_the_run_set_them():
    """Every program a test starts inherits the test process's ``XLA_FLAGS``: a test that
    changes them in place (a script imported for its functions that asks for 8 CPU devices at
    import) turns the examples later tests run on that xdist worker into 8-device programs,
    whose output is not the one recorded. Such a change is undone and fails the test that made it."""
    before = os.environ.get("XLA_FLAGS")
    yield
    after = os.environ.get("XLA_FLAGS")
    if after != before:
        if before is None:
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = before
        pytest.fail(f"the test changed XLA_FLAGS from {before!r} to {after!r} for the rest of the run (undone)")


POD = "v5e:4x4"
"""The pod the in-process pod tests see: 16 chips on 4 hosts (libtpu's 2x2 chips per host),
so process 0 has 4 local devices of 16, and compiling for it stays cheap."""


@pytest.fixture(scope="session")
def tpu_pod():
    """:data:`POD`'s compile-only devices, as ``run --topology`` gives them to a program
    (libtpu loaded in the test process); skipped without libtpu, failed where CI requires it."""
    from offload_fixer.jax_compat import pod
    from offload_fixer.topology import parse_topology

    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # the oracle's workers hold libtpu too
    try:
        return pod.start(parse_topology(POD))
    except pod.PodUnavailable as exc:
        if "tpu" in REQUIRED:
            pytest.fail(f"this environment must build TPU pods: {exc}")
        pytest.skip(str(exc))


ONCE = {
    "tests/fuzz/test_bad_input.py": "the command line's answers to bad files and arguments",
    "tests/fuzz/test_interrupts.py": "signals during a write",
    "tests/fuzz/test_paths.py": "where writes land",
    "tests/fuzz/test_lsp_protocol.py": "the language server's protocol framing",
    "tests/test_pre_commit.py": "pre-commit installs the hook into an environment of its own",
    "tests/test_import_graph.py": "the package's own import graph",
    "tests/test_module_size.py": "the package's module sizes",
    "tests/lsp/test_startup.py": "the language server's start path and worker process",
    "tests/codemods/test_codemod_commands.py::test_the_wheel_installs_the_codemods_inside_the_package": "packaging",
    "tests/static/test_cache.py::test_concurrent_runs_leave_whole_entries": "file locking of the cache",
    "tests/static/test_source.py::test_benchmark_module_checks_the_same_through_a_cache": "the cache's round trip",
    "tests/test_runner_pods.py::test_a_pod_program_is_checked_for_the_pod_from_one_machine": (
        "the command line's wiring of --topology (the pod view and a pod run are tested in-process in every JAX)"
    ),
    "tests/test_runner_pods.py::test_a_pod_it_cannot_check_is_refused_before_the_program_runs": (
        "--topology's arguments, refused before the program runs"
    ),
}
"""Tests of what the installed JAX cannot change (file handling, packaging, the package's own
structure), with why: marked ``once``, and ``scripts/test.sh`` runs them in the main
environment only, so the version matrix spends its time on what versions change."""


JAX_INDEPENDENT = {
    "tests/static/": "the static check: source text read with a JAX version's rules, never JAX itself",
    "tests/codemods/": "the codemods: libcst edits of source text",
    "tests/source/": "reading source: encodings, lines, bindings, Python's grammar",
    "tests/lsp/": "the language server: its static engine, settings, edits superseding, transport",
    "tests/notebook/": "notebooks read as programs and checked statically (the kernel's tests run JAX)",
    "tests/test_lsp.py": "the language server, on projects that name their JAX version",
    "tests/test_lsp_notebooks.py": "the language server on notebooks, each naming its JAX version",
    "tests/test_lsp_examples.py": "the language server on the README's programs",
    "tests/cli/test_add_noqa.py": "--add-noqa, run with a named JAX version",
    "tests/test_cli_imports.py": "what `check` imports (never JAX)",
    "tests/test_suppression.py": "suppression comments",
    "tests/test_batch_gc.py": "the collector's settings around a check",
    "tests/test_codes.py": "the codes' registries",
    "tests/test_config.py": "pyproject settings",
    "tests/test_console.py": "the terminal's colours and widths",
    "tests/test_model.py": "the model's plain data",
    "tests/test_report.py": "the output formats",
    "tests/test_recursion.py": "deep trees on a large stack",
    "tests/test_topology.py": "pod names",
    "tests/test_xla_messages.py": "XLA's message texts",
    "tests/test_state_folders.py": "the state folders on disk",
    "tests/test_resolved_paths.py": "writes through resolved paths",
}
"""Test directories and modules that run no JAX: the code they test never imports it (the static
check, the codemods, the language server's static engine), so the installed JAX reaches them only
as a version whose rules they name or take (``jax_compat.spelling``), while the Python version
can change them (its grammar, ``ast``, libcst's parser). Marked ``jax_independent``, and
``scripts/test.sh`` runs them once per Python version: in the main environment (Python 3.12) and
in jax062's (Python 3.11, and JAX 0.6.2's rules, which are 0.4.35's; the static check reads the
same of 0.10.2 as of 0.12). A test here that runs JAX (traces, lowers or compiles, or starts a
program that does) is marked ``jax_dependent`` where it is written, and runs in every
environment; one that does so in the test process unmarked fails (:class:`JaxWork`)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "once: independent of the installed JAX (ONCE in tests/conftest.py)")
    config.addinivalue_line(
        "markers", "jax_independent: runs no JAX; Python's version matters (JAX_INDEPENDENT in tests/conftest.py)"
    )
    config.addinivalue_line(
        "markers", "jax_dependent: runs JAX where its directory or module is JAX_INDEPENDENT (tests/conftest.py)"
    )


def _jax_independent(path: str) -> bool:
    return any(path == entry or (entry.endswith("/") and path.startswith(entry)) for entry in JAX_INDEPENDENT)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        function = item.nodeid.split("[")[0]
        if path in ONCE or function in ONCE:
            item.add_marker(pytest.mark.once)
        if _jax_independent(path) and item.get_closest_marker("jax_dependent") is None:
            item.add_marker(pytest.mark.jax_independent)


class JaxWork:
    """What JAX traces, lowers and compiles in this process: ``jax.monitoring``'s duration
    events (named alike from JAX 0.4.35 to 0.12), heard from the first test that asks while JAX
    is imported, so a run that never imports JAX does not start it for this."""

    EVENTS = frozenset(
        f"/jax/core/compile/{name}_duration" for name in ("jaxpr_trace", "jaxpr_to_mlir_module", "backend_compile")
    )
    count = 0
    listening = False

    @classmethod
    def so_far(cls) -> int | None:
        """Events heard so far; ``None`` while JAX is not imported."""
        if "jax" not in sys.modules:
            return None
        if not cls.listening:
            import jax.monitoring

            jax.monitoring.register_event_duration_secs_listener(cls._heard)
            cls.listening = True
        return cls.count

    @classmethod
    def _heard(cls, event: str, duration: float, **kwargs: object) -> None:
        if event in cls.EVENTS:
            cls.count += 1


@pytest.fixture(autouse=True)
def jax_independent_runs_no_jax(request: pytest.FixtureRequest):
    """A ``jax_independent`` test skips two of the four JAX versions: one that imports JAX or
    traces, lowers or compiles with it in the test process would not be run where its result can
    differ, so it fails, naming the mark it needs; so does one that starts a command that imports
    JAX through :mod:`tests.cli_support` (a program started otherwise is not seen here)."""
    if request.node.get_closest_marker("jax_independent") is None:
        yield
        return
    from tests import cli_support

    before = JaxWork.so_far()
    cli_support.jax_free_test = request.node.nodeid
    try:
        yield
    finally:
        cli_support.jax_free_test = None
    after = JaxWork.so_far()
    if after is not None and (before is None or after > before):
        did = "imported JAX" if before is None else f"traced, lowered or compiled with JAX ({after - before} times)"
        pytest.fail(
            f"{request.node.nodeid} {did}, but runs only in some environments (JAX_INDEPENDENT in tests/conftest.py): "
            "mark it @pytest.mark.jax_dependent"
        )
