"""Applying plans: bytes kept outside the edits, atomic writes, refusals with distinct errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import libcst as cst
import pytest

from offload_fixer.fixes import (
    FixNotConvergedError,
    FixVerificationError,
    ReadOnlySourceError,
    SourceChangedError,
    SourceEncodingError,
    SourceSyntaxError,
    apply_plans,
    plan_fixes,
)
from offload_fixer.fixes.apply import (
    LineMap,
    fix_to_fixpoint,
    split_lines,
    verify,
)
from offload_fixer.model import Diagnostic, FunctionRef, Origin, Span, Step

NEW_JAX = "0.10.2"

SOURCE = (
    "import jax\n"
    "from jax.sharding import NamedSharding, PartitionSpec as P\n"
    "\n"
    "mesh = jax.make_mesh((1,), ('x',))\n"
    "host = NamedSharding(mesh, P(), memory_kind='pinned_host')\n"
    "\n"
    "\n"
    "@jax.jit\n"
    "def step(x):\n"
    "    # keep a host copy\n"
    "    h = jax.device_put(x, host)\n"
    "    return x,   h  # spacing and comment kept\n"
)
FIXED_RETURN = "    return x,   jax.device_put(h, jax.memory.Space.Device)  # spacing and comment kept\n"


def diagnostic(path: Path, output: str = "[1]", function_line: int = 8) -> Diagnostic:
    origin = Origin("move_to_host", "pinned_host", Span(str(path), 11, 9), key="move:11")
    return Diagnostic(
        "OFL1200",
        "error",
        "tpu",
        "m",
        "e",
        output_path=output,
        origin=origin,
        function=FunctionRef("step", str(path), function_line),
    )


def device_plans(path: Path, **kwargs: object):
    return plan_fixes([diagnostic(path, **kwargs)], strategy="device", jax_version=NEW_JAX)  # type: ignore[arg-type]


def test_preview_leaves_the_file_alone_and_diffs_only_the_edit(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    (result,) = apply_plans(device_plans(path), write=False)
    assert result.error is None and not result.written and result.passes == 2
    assert path.read_text() == SOURCE
    assert result.new_text == SOURCE.replace("    return x,   h  # spacing and comment kept\n", FIXED_RETURN)
    body = [line for line in result.diff.splitlines(keepends=True)[2:] if line[0] in "+-"]
    assert body == ["-    return x,   h  # spacing and comment kept\n", "+" + FIXED_RETURN]


def test_write_replaces_atomically_and_keeps_the_mode(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    os.chmod(path, 0o640)
    (result,) = apply_plans(device_plans(path), write=True)
    assert result.written
    assert path.read_text() == result.new_text
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.py"]  # no temporary left behind


def test_write_through_a_symlink_edits_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text(SOURCE)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    (result,) = apply_plans(device_plans(link), write=True)
    assert result.written and link.is_symlink()
    assert FIXED_RETURN in real.read_text()


@pytest.mark.parametrize(
    "encode",
    [
        pytest.param(lambda text: text.replace("\n", "\r\n").encode(), id="crlf"),
        pytest.param(lambda text: text.rstrip("\n").encode(), id="no-final-newline"),
        pytest.param(lambda text: b"\xef\xbb\xbf" + text.encode(), id="bom"),
        pytest.param(
            lambda text: (
                "# -*- coding: latin-1 -*-\n" + text.replace("keep a host copy", "garde une copie à l'hôte")
            ).encode("latin-1"),
            id="latin-1-cookie",
        ),
    ],
)
def test_bytes_outside_the_edit_are_kept(tmp_path: Path, encode) -> None:
    path = tmp_path / "step.py"
    original = encode(SOURCE)
    path.write_bytes(original)
    first_line = 9 if original.startswith(b"#") else 8
    (result,) = apply_plans(device_plans(path, function_line=first_line), write=True)
    assert result.error is None and result.written
    old_return = encode("    return x,   h  # spacing and comment kept\n").removeprefix(b"\xef\xbb\xbf")
    new_return = encode(FIXED_RETURN).removeprefix(b"\xef\xbb\xbf")
    if original.startswith(b"# -*-"):
        header = b"# -*- coding: latin-1 -*-\n"
        old_return, new_return = old_return.removeprefix(header), new_return.removeprefix(header)
    if not original.endswith(b"\n"):
        old_return, new_return = old_return.rstrip(b"\r\n"), new_return.rstrip(b"\r\n")
    assert path.read_bytes() == original.replace(old_return, new_return)
    if not original.endswith(b"\n"):
        assert result.diff.endswith("\n\\ No newline at end of file\n")


def test_second_application_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    (plan,) = plan_fixes([diagnostic(path)], jax_version=NEW_JAX)  # host: adds an import line
    (result,) = apply_plans([plan], write=True)
    moved = plan.target.remapped(LineMap(split_lines(SOURCE), split_lines(result.new_text)))
    again, passes = fix_to_fixpoint(str(path), cst.parse_module(path.read_bytes()), [(plan.codemod, moved)])
    assert passes == 1 and again.code == result.new_text


def test_changed_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    plans = device_plans(path)
    path.write_text(SOURCE + "\n# edited after the analysis\n")
    (result,) = apply_plans(plans, write=True)
    assert isinstance(result.error, SourceChangedError)
    assert path.read_text().endswith("# edited after the analysis\n")
    with pytest.raises(SourceChangedError):
        result.raise_for_error()


def test_read_only_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    os.chmod(path, 0o444)
    (result,) = apply_plans(device_plans(path), write=True)
    assert isinstance(result.error, ReadOnlySourceError)
    assert path.read_text() == SOURCE
    (preview,) = apply_plans(device_plans(path), write=False)
    assert preview.error is None and preview.changed


def test_undecodable_and_unparsable_files_fail_alone(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(SOURCE)
    plans = device_plans(good)
    latin = tmp_path / "latin.py"
    latin.write_bytes(SOURCE.replace("keep a host copy", "h\xf4te").encode("latin-1"))
    broken = tmp_path / "broken.py"
    broken.write_text(SOURCE.replace("def step(x):", "def step(x:"))
    plans += device_plans(latin) + device_plans(broken)
    results = {Path(r.path).name: r for r in apply_plans(plans, write=True)}
    assert results["good.py"].written
    assert isinstance(results["latin.py"].error, SourceEncodingError)
    assert "line 10" in str(results["latin.py"].error)
    error = results["broken.py"].error
    assert isinstance(error, SourceSyntaxError) and error.line == 9


def test_unsafe_plans_need_consent(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE.replace("    return x,   h", "    return x,   helper(h)"))
    (plan,) = device_plans(path, output="[1][0]")  # inside a call result: moves all of it
    assert plan.safety == "unsafe"
    (skipped,) = apply_plans([plan], write=True)
    assert not skipped.changed and skipped.skipped[0][1].startswith("unsafe")
    (applied,) = apply_plans([plan], write=True, unsafe=True)
    assert "jax.device_put(helper(h), jax.memory.Space.Device)" in path.read_text()
    assert applied.written


def test_not_converging_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    (result,) = apply_plans(device_plans(path), write=True, max_passes=1)
    assert isinstance(result.error, FixNotConvergedError)
    assert path.read_text() == SOURCE


def test_result_that_does_not_compile_is_refused() -> None:
    with pytest.raises(FixVerificationError):
        verify("bad.py", b"def f():\n    return (\n")
    with pytest.raises(FixVerificationError):  # parses, but CPython rejects it
        verify("bad.py", b"def f():\n    nonlocal x\n")


TWO_OFFLOADS = (
    "import jax\n"
    "\n"
    "A, B = HOST_SHARDINGS\n"
    "@jax.jit\n"
    "def step(x):\n"
    "    return x, jax.device_put(x, A), jax.device_put(x, B)\n"
)


def test_two_origins_editing_one_jit_settle_in_successive_passes(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(TWO_OFFLOADS)
    diagnostics = [
        Diagnostic(
            "OFL1200",
            "error",
            "tpu",
            "m",
            "e",
            output_path=f"[{i}]",
            origin=Origin("move_to_host", "pinned_host", Span(str(path), 6, col), key=f"move:{col}"),
            function=FunctionRef("step", str(path), 4),
        )
        for i, col in ((1, 15), (2, 38))
    ]
    plans = plan_fixes(diagnostics, jax_version=NEW_JAX)
    assert [p.strategy for p in plans] == ["host", "host"]
    (result,) = apply_plans(plans, write=False)
    assert result.passes == 3  # the second out_shardings edit needs the first one in place
    assert "@partial(jax.jit, out_shardings=(None, A, B))\n" in result.new_text


def test_two_streamed_parameters_move_in_one_pass(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(
        "import jax\n\n"
        "HOST = make_host_sharding()\n"
        "def step(params, opt, batch):\n"
        "    return params * batch, opt * 2\n\n"
        "step_jit = jax.jit(step, in_shardings=(HOST, HOST, None))\n"
    )
    diagnostics = [
        Diagnostic(
            "OFL1200",
            "error",
            "tpu",
            "m",
            "e",
            output_path=f"[{i}]",
            origin=Origin(
                "host_argument",
                "pinned_host",
                None,
                f"argument {name} declared pinned_host (in_shardings)",
                key=f"arg:{i}",
                argument=name,
                argument_index=i,
            ),
            trace=(Step("stablehlo.multiply", "host compute", Span(str(path), 5, 12)),),
            function=FunctionRef("step", str(path), 3),
        )
        for i, name in enumerate(["params", "opt"])
    ]
    plans = plan_fixes(diagnostics, jax_version="0.6.2")
    (result,) = apply_plans(plans, write=False, unsafe=True)
    assert result.passes == 2
    assert result.new_text.splitlines()[4:6] == [
        '    params = jax.device_put(params, HOST.with_memory_kind("device"))',
        '    opt = jax.device_put(opt, HOST.with_memory_kind("device"))',
    ]


def test_added_lines_follow_the_files_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_bytes(SOURCE.replace("\n", "\r\n").encode())
    (plan,) = plan_fixes([diagnostic(path)], jax_version=NEW_JAX)  # host: an import and a decorator
    apply_plans([plan], write=True)
    data = path.read_bytes()
    assert b"from functools import partial\r\n" in data
    assert b"@partial(jax.jit, out_shardings=(None, host))\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")


# ---------------------------------------------------------------------------------------
# Writing keeps the file: owner, group, mode, attributes, hard links
def test_a_hard_linked_file_is_fixed_in_place_for_every_link(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    other = tmp_path / "also.py"
    os.link(path, other)
    inode = path.stat().st_ino
    (result,) = apply_plans(device_plans(path), write=True)
    assert result.written and FIXED_RETURN in other.read_text()
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_another_users_file_keeps_its_owner_group_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    os.chown(path, 65534, 65534)
    os.chmod(path, 0o640)
    (result,) = apply_plans(device_plans(path), write=True)
    info = path.stat()
    assert result.written and FIXED_RETURN in path.read_text()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (65534, 65534, 0o640)


def test_extended_attributes_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    try:
        os.setxattr(path, "user.reviewed-by", b"alice")
    except OSError:
        pytest.skip("this filesystem has no user extended attributes")
    (result,) = apply_plans(device_plans(path), write=True)
    assert result.written and os.getxattr(path, "user.reviewed-by") == b"alice"


def test_a_writable_file_in_a_read_only_directory_is_fixed(tmp_path: Path) -> None:
    directory = tmp_path / "locked"
    directory.mkdir()
    path = directory / "step.py"
    path.write_text(SOURCE)
    directory.chmod(0o555)
    try:
        (result,) = apply_plans(device_plans(path), write=True)
    finally:
        directory.chmod(0o755)
    assert result.written and FIXED_RETURN in path.read_text()
    assert sorted(p.name for p in directory.iterdir()) == ["step.py"]


def test_an_append_only_file_is_refused_untouched(tmp_path: Path) -> None:
    import subprocess

    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    if subprocess.run(["chattr", "+a", str(path)], capture_output=True).returncode != 0:
        pytest.skip("chattr +a is not possible here (not root, or the filesystem has no such flag)")
    try:
        (result,) = apply_plans(device_plans(path), write=True)
        assert isinstance(result.error, ReadOnlySourceError) and "nothing was written" in str(result.error)
        assert path.read_text() == SOURCE
    finally:
        subprocess.run(["chattr", "-a", str(path)], capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step.py"]


def test_a_cr_only_file_with_a_coding_cookie_is_fixed_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "step.py"
    text = "# -*- coding: latin-1 -*-\n# garde une copie \xe0 l'h\xf4te\n" + SOURCE
    original = text.replace("\n", "\r").encode("latin-1")
    path.write_bytes(original)
    (result,) = apply_plans(device_plans(path, function_line=10), write=True)
    assert result.error is None and result.written
    old, new = b"    return x,   h  # spacing and comment kept\r", FIXED_RETURN.replace("\n", "\r").encode()
    assert path.read_bytes() == original.replace(old, new)


def test_a_plan_labelled_unsafe_is_shown_and_applied_as_unsafe(tmp_path: Path) -> None:
    """The ``fix`` line a finding shows is its plan's label, and ``--fix`` treats the plan by
    that same label: an unsafe plan waits for ``--unsafe-fixes``, in words a CLI user can act on."""
    import dataclasses

    from offload_fixer.findings import fix_marks

    path = tmp_path / "step.py"
    path.write_text(SOURCE)
    (plan,) = plan_fixes([diagnostic(path)], strategy="host", jax_version=NEW_JAX)
    unsafe = dataclasses.replace(plan, safety="unsafe")
    assert {mark.status for mark in fix_marks(plan.diagnostics, [unsafe], unsafe=False).values()} == {"unsafe"}
    (declined,) = apply_plans([unsafe], write=True)
    assert not declined.written and declined.skipped[0][1].startswith("unsafe: ")
    assert "unsafe=True" not in declined.skipped[0][1] and path.read_text() == SOURCE
    (applied,) = apply_plans([unsafe], write=True, unsafe=True)
    assert applied.written and path.read_text() != SOURCE


def test_lines_move_across_edits_as_python_counts_them() -> None:
    """A CR-only file is many lines to Python and libcst: targets below an inserted line move."""
    old, new = "a\rb\rc\r", "a\rnew\rb\rc\r"
    assert LineMap(split_lines(old), split_lines(new))(3) == 4


def test_every_fix_of_a_cr_only_file_lands_in_one_run(tmp_path: Path) -> None:
    from offload_fixer.static import check_paths

    fixture = Path(__file__).resolve().parents[1] / "lsp_fixtures" / "several_problems.py"
    path = tmp_path / "several.py"
    path.write_bytes(fixture.read_bytes().replace(b"\n", b"\r"))

    def findings():
        return [d for r in check_paths([str(path)], jax_version="0.6.2") for d in r.diagnostics]

    before = findings()
    assert len(before) == 6  # each function's OFL1200 and the OFL1201 of the compute on its host value
    # two moves to device add a line each above the third fix (h moved back where it is computed on),
    # and each move fixes both findings of its function
    results = apply_plans(plan_fixes(before, strategy="auto", jax_version="0.6.2"), write=True, unsafe=True)
    assert [r.error for r in results] == [None] and len(results[0].applied) == 3
    assert findings() == []
    assert b"\n" not in path.read_bytes()


def test_a_form_feed_before_the_def_is_kept_and_the_function_fixed_once(tmp_path: Path) -> None:
    # libcst drops a form feed in a statement's indentation; the fixer gives it the text with
    # that indentation cut and puts the form feed back, so nothing is duplicated or refused
    path = tmp_path / "step.py"
    path.write_text(SOURCE.replace("@jax.jit\ndef step", "\f\n@jax.jit\n\fdef step"))
    plans = plan_fixes([diagnostic(path, function_line=9)], strategy="device", jax_version=NEW_JAX)
    [result] = apply_plans(plans, write=True)
    assert result.error is None and result.written
    text = path.read_text()
    assert text.count("def step") == 1 and "\f\n@jax.jit\n\fdef step(x):\n" in text
    assert FIXED_RETURN in text


def test_a_splice_that_is_not_the_intended_edit_is_refused() -> None:
    from offload_fixer.fixes.apply import check_intended
    from offload_fixer.fixes.errors import FixVerificationError
    from offload_fixer.fixes.excerpt import FileOutline

    text = "def f(x):\n    return x\n"
    outline = FileOutline.of("f.py", text)
    excerpt = outline.excerpt(frozenset({0}))
    fixed = cst.parse_module("def f(x):\n    return x + 1\n")
    check_intended(outline, excerpt, fixed, "def f(x):\n    return x + 1\n")
    duplicated = "def f(x):\ndef f(x):\n    return x + 1\n".replace("def f(x):\ndef", "def f(x):\n    pass\ndef")
    with pytest.raises(FixVerificationError, match="not the intended edit"):
        check_intended(outline, excerpt, fixed, duplicated)
