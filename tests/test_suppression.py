"""``# offload-fixer: ignore[...]``: parsing, attachment to statements, unused directives."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

from offload_fixer.model import Diagnostic, FunctionRef, Origin, Span
from offload_fixer.suppression import filter_suppressed, find_suppressions

PATH = "train.py"


def _diagnostic(code="OFL1200", origin_line=None, return_line=None, span_line=None, def_line=None, path=PATH):
    return Diagnostic(
        code=code,
        severity="error",
        target="tpu",
        message="m",
        explanation="e",
        origin=Origin("move_to_host", "pinned_host", Span(path, origin_line, 5)) if origin_line else None,
        return_span=Span(path, return_line, 5) if return_line else None,
        span=Span(path, span_line, 5) if span_line else None,
        function=FunctionRef("f", path, def_line) if def_line else None,
    )


def _source(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _run(text, *diagnostics, enabled=None):
    return filter_suppressed(diagnostics, {PATH: _source(text)}, enabled=enabled)


def test_parses_bare_single_and_multiple_codes():
    source = _source(
        """
        a = 1  # offload-fixer: ignore
        b = 2  # offload-fixer: ignore[OFL1200]
        c = 3  # noqa: E501  # offload-fixer: ignore[ofl1200, OFL1201]
        d = "# offload-fixer: ignore"  # a string is not a comment
        """
    )
    found = find_suppressions(PATH, source)
    assert [(s.line, s.codes) for s in found] == [(1, ()), (2, ("OFL1200",)), (3, ("OFL1200", "OFL1201"))]
    assert found[0].col == 8 and not found[0].standalone


def test_comment_on_the_move_line_suppresses_matching_code_only():
    text = """
    def f(x):
        y = jax.device_put(x, host)  # offload-fixer: ignore[OFL1200]
        return y + 1
    """
    hit = _diagnostic("OFL1200", origin_line=2, return_line=3)
    other = _diagnostic("OFL1201", span_line=2)
    kept, suppressed, unused = _run(text, hit, other)
    assert suppressed == [hit] and kept == [other] and unused == []


def test_comment_on_the_return_line():
    text = """
    def f(x):
        y = jax.device_put(x, host)
        return y + 1  # offload-fixer: ignore
    """
    diagnostic = _diagnostic(origin_line=2, return_line=3)
    assert _run(text, diagnostic)[1] == [diagnostic]


def test_any_line_of_a_multi_line_statement():
    text = """
    def f(x):
        y = jax.device_put(
            x,
            host,  # offload-fixer: ignore[OFL1200]
        )
        z = y + 1
        return z
    """
    inside = _diagnostic(origin_line=2)
    outside = _diagnostic(return_line=7)
    kept, suppressed, _ = _run(text, inside, outside)
    assert suppressed == [inside] and kept == [outside]


def test_diagnostic_spanning_lines_meets_a_comment_on_its_last_line():
    text = """
    y = jax.device_put(
        x, host)  # offload-fixer: ignore
    """
    diagnostic = Diagnostic(
        code="OFL1200",
        severity="error",
        target="tpu",
        message="m",
        explanation="e",
        span=Span(PATH, 1, 5, end_line=2, end_col=17),
    )
    assert _run(text, diagnostic)[1] == [diagnostic]


def test_decorator_line_covers_the_whole_function():
    text = """
    import jax

    @functools.partial(  # offload-fixer: ignore[OFL1200]
        jax.jit, donate_argnums=0)
    def f(x):
        y = jax.device_put(x, host)
        return y + 1


    def g(x):
        return jax.device_put(x, host) + 1
    """
    in_f = _diagnostic(origin_line=6, return_line=7)
    in_f_no_spans = _diagnostic(def_line=5)
    in_g = _diagnostic(origin_line=11, return_line=11)
    kept, suppressed, unused = _run(text, in_f, in_f_no_spans, in_g)
    assert suppressed == [in_f, in_f_no_spans] and kept == [in_g] and unused == []


def test_def_line_covers_the_whole_function_but_other_headers_only_themselves():
    text = """
    def f(x):  # offload-fixer: ignore[OFL1201]
        with compute_on("device_host"):  # offload-fixer: ignore[OFL1200]
            y = x * 2
        return y
    """
    body = _diagnostic("OFL1201", span_line=3)
    header = _diagnostic("OFL1200", origin_line=2)
    below_header = _diagnostic("OFL1200", origin_line=3)
    kept, suppressed, _ = _run(text, body, header, below_header)
    assert suppressed == [body, header] and kept == [below_header]


def test_standalone_comment_covers_the_next_statement_only():
    text = """
    def f(x):
        # offload-fixer: ignore[OFL1200]
        # (the offloaded copy is returned on purpose)
        y = jax.device_put(x, host)
        z = jax.device_put(x, host)

        # offload-fixer: ignore[OFL1201]

        w = jnp.sin(z)
        return y, z, w
    """
    next_statement = _diagnostic(origin_line=4)
    later = _diagnostic(origin_line=5)
    after_blank_line = _diagnostic("OFL1201", span_line=9)
    kept, suppressed, unused = _run(text, next_statement, later, after_blank_line)
    assert suppressed == [next_statement] and kept == [later, after_blank_line]
    assert [(u.line, u.codes) for u in unused] == [(7, ("OFL1201",))]


def test_standalone_comment_above_a_decorator_covers_the_function():
    text = """
    # offload-fixer: ignore
    @jax.jit
    def f(x):
        return jax.device_put(x, host) + 1
    """
    diagnostic = _diagnostic(origin_line=4)
    assert _run(text, diagnostic)[1] == [diagnostic]


def test_unused_and_unknown_codes_are_reported():
    text = """
    a = 1  # offload-fixer: ignore
    b = jax.device_put(x, host)  # offload-fixer: ignore[OFL1200, OFL1201, OFL9999]
    """
    diagnostic = _diagnostic(origin_line=2)
    _, suppressed, unused = _run(text, diagnostic)
    assert suppressed == [diagnostic]
    assert [(u.line, u.codes, u.reason) for u in unused] == [
        (1, (), "unused"),
        (2, ("OFL9999",), "unknown"),
        (2, ("OFL1201",), "unused"),
    ]
    assert unused[2].message == "unused offload-fixer suppression: OFL1201"


def test_codes_that_were_not_checked_are_not_called_unused():
    text = "b = 1  # offload-fixer: ignore[OFL1201]\n"
    assert _run(text, enabled={"OFL1200"})[2] == []
    assert len(_run(text, enabled={"OFL1201"})[2]) == 1


def test_files_without_diagnostics_report_every_directive_unused():
    sources = {"a.py": "x = 1  # offload-fixer: ignore[OFL1200]\n", "b.py": "y = 2\n"}
    kept, suppressed, unused = filter_suppressed([], sources)
    assert (kept, suppressed) == ([], [])
    assert [(u.path, u.line) for u in unused] == [("a.py", 1)]


def test_paths_are_compared_after_normalising(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    diagnostic = _diagnostic(origin_line=1, path=str(tmp_path / "pkg" / "m.py"))
    sources = {"pkg/m.py": "y = jax.device_put(x, host)  # offload-fixer: ignore\n"}
    assert filter_suppressed([diagnostic], sources)[1] == [diagnostic]


def test_file_that_does_not_parse_still_honours_same_line_directives():
    text = """
    def f(x:
        y = jax.device_put(x, host)  # offload-fixer: ignore
    """
    same_line = _diagnostic(origin_line=2)
    other_line = _diagnostic(origin_line=1)
    kept, suppressed, _ = _run(text, same_line, other_line)
    assert suppressed == [same_line] and kept == [other_line]


def test_match_and_one_line_compound_statements():
    text = """
    match mode:  # offload-fixer: ignore[OFL1201]
        case "host":
            y = jnp.sin(h)
    if offload: y = jax.device_put(x, host)  # offload-fixer: ignore[OFL1200]
    """
    header = _diagnostic("OFL1201", span_line=1)
    case_body = _diagnostic("OFL1201", span_line=3)
    one_line = _diagnostic("OFL1200", origin_line=4)
    kept, suppressed, _ = _run(text, header, case_body, one_line)
    assert suppressed == [header, one_line] and kept == [case_body]


def test_a_directive_on_the_diagnostics_own_line_gets_the_credit():
    text = """
    y = jax.device_put(  # offload-fixer: ignore
        x,
        host)  # offload-fixer: ignore[OFL1200]
    z = jnp.sin(y)
    """
    on_line_three = _diagnostic(origin_line=3)
    elsewhere_in_statement = _diagnostic("OFL1201", span_line=2)
    kept, suppressed, unused = _run(text, on_line_three, elsewhere_in_statement)
    assert suppressed == [on_line_three, elsewhere_in_statement] and kept == []
    assert unused == []
    kept, suppressed, unused = _run(text, on_line_three)
    assert [(u.line, u.codes) for u in unused] == [(1, ())]


# ---------------------------------------------------------------------------------------
# ruff's noqa comments, honoured as ruff honours them
def test_noqa_with_our_code_silences_findings_on_its_line_only():
    text = """
    def f(x):
        y = jax.device_put(x, host)  # noqa: OFL1200
        return (
            y
        )
    """
    on_the_line = _diagnostic("OFL1200", origin_line=2)
    below = _diagnostic("OFL1200", span_line=4)  # in the statement after, not on the noqa's line
    kept, suppressed, unused = _run(text, on_the_line, below)
    assert suppressed == [on_the_line] and kept == [below] and unused == []


def test_bare_noqa_silences_every_code_and_is_never_called_unused():
    text = """
    y = jax.device_put(x, host)  # noqa
    z = 1  # noqa
    """
    hit = _diagnostic("OFL1201", span_line=1)
    kept, suppressed, unused = _run(text, hit)
    assert suppressed == [hit] and kept == [] and unused == []


def test_noqa_of_other_tools_is_theirs_and_ours_unused_is_reported():
    text = """
    y = jax.device_put(x, host)  # noqa: E501
    z = 1  # noqa: E501, OFL1200
    """
    hit = _diagnostic("OFL1200", origin_line=1)
    kept, suppressed, unused = _run(text, hit)
    assert kept == [hit] and suppressed == []
    assert [(u.line, u.codes, u.message) for u in unused] == [(2, ("OFL1200",), "unused `# noqa`: OFL1200")]


def test_directives_found_statement_by_statement_are_those_of_the_whole_text():
    """Only the top-level statements that spell a directive are tokenized, each alone, and
    each is kept by its text: the same directives, lines and columns as one pass over the
    text, whatever its line ends."""
    from pathlib import Path

    from offload_fixer.static.outline import outline

    root = Path(__file__).resolve().parents[1]
    texts = [
        p.read_text(encoding="utf-8") for d in ("offload_fixer", "tests") for p in sorted((root / d).rglob("*.py"))
    ]
    written = _source(
        '''
        import jax  # noqa: F401
        s = """
        x = 1  # offload-fixer: ignore
        """
        class A:
            # offload-fixer: ignore[OFL1200]
            def f(self):
                return 1  # noqa: OFL1201
        y = 2  # noqa
        '''
    )
    texts += [written, written.replace("\n", "\r\n")]
    compared = 0
    for text in texts:
        spans = outline(text).spans
        if spans is None:
            continue
        whole = find_suppressions(PATH, text)
        assert find_suppressions(PATH, text, spans) == whole
        assert find_suppressions(PATH, text, spans) == whole  # kept by text the second time
        compared += "noqa" in text or "offload-fixer" in text
    assert compared > 20
    assert [(s.line, s.codes, s.noqa) for s in find_suppressions(PATH, written, outline(written).spans)] == [
        (6, ("OFL1200",), False),
        (8, ("OFL1201",), True),
        (9, (), True),
    ]


# ---------------------------------------------------------------------------------------
# ruff 0.17's suppression comments beside noqa comments, with our codes, compared with the pinned ruff
RUFF = shutil.which("ruff", path=os.path.dirname(sys.executable))
RUFF_FORMS = {
    # name: (the lines around the finding's line, written {finding}; whether it is silenced; warned)
    "end of line": ("{finding}  # ruff: ignore[{codes}]", True, False),
    "alone above": ("# ruff: ignore[{codes}]\n{finding}", True, False),
    "alone above, a blank line between": ("# ruff: ignore[{codes}]\n\n{finding}", True, False),
    "alone below": ("{finding}\n# ruff: ignore[{codes}]", False, True),
    "block": ("# ruff: disable[{codes}]\n{finding}\n# ruff: enable[{codes}]", True, False),
    "block left open": ("# ruff: disable[{codes}]\n{finding}", True, True),
    "block closed before": ("# ruff: disable[{codes}]\n# ruff: enable[{codes}]\n{finding}", False, True),
    "an enable alone": ("{finding}\n# ruff: enable[{codes}]", False, True),
    "file-ignore below": ("{finding}\n# ruff: file-ignore[{codes}]", True, False),
}
"""Where each comment goes, as ruff's docs show it, and what ruff 0.17.6 does (the test below
asks the pinned ruff each time): a comment that silences nothing is warned about, as RUF100,
RUF103 and RUF104 warn (the unused code, the stray ``enable``, the unmatched ``disable``)."""


def _ruff_outcome(tmp_path, form: str) -> tuple[bool, bool]:
    """(silenced, warned) by the pinned ruff for an unused import under ``form``."""
    import subprocess

    (tmp_path / "ruff.toml").write_text('[lint]\nselect = ["F401", "RUF100", "RUF103", "RUF104"]\nexternal = ["OFL"]\n')
    (tmp_path / "lint.py").write_text(form.format(finding="import os", codes="F401") + "\n")
    done = subprocess.run(
        [RUFF, "check", "--no-cache", "--output-format", "concise", "lint.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    return "F401" not in done.stdout, "RUF10" in done.stdout


@__import__("pytest").mark.skipif(
    RUFF is None, reason="ruff (the lint extra, pinned in constraints.txt) is not installed"
)
@__import__("pytest").mark.parametrize("name", list(RUFF_FORMS))
def test_ruffs_suppression_comments_with_our_codes_do_as_ruff_does(tmp_path, name):
    form, silenced, warned = RUFF_FORMS[name]
    assert _ruff_outcome(tmp_path, form) == (silenced, warned), "the pinned ruff does otherwise now"
    # the finding's origin is the jit's line; its return and def lines are above the comments
    jitted = "kept = jax.jit(double, in_shardings=HOST)"
    prefix = "import jax\n\n\ndef double(x):\n    return x\n\n\n"
    source = prefix + form.format(finding=jitted, codes="OFL1200") + "\n"
    line = next(n for n, text in enumerate(source.splitlines(), 1) if text.startswith(jitted))
    finding = _diagnostic(origin_line=line, return_line=5, def_line=4)
    _, suppressed, unused = filter_suppressed([finding], {PATH: source})
    assert (bool(suppressed), bool(unused)) == (silenced, warned), unused
    if "ruff: ignore" not in form:  # the block and file forms in offload-fixer's own name too
        ours = prefix + form.replace("ruff:", "offload-fixer:").format(finding=jitted, codes="OFL1200") + "\n"
        assert bool(filter_suppressed([finding], {PATH: ours})[1]) == silenced


def test_ruffs_comments_with_other_tools_codes_only_are_theirs():
    source = _source(
        """
        import os  # ruff: ignore[F401]
        # ruff: disable[E501]
        x = 1
        # ruff: enable[E501]
        """
    )
    assert find_suppressions(PATH, source) == []
    mixed = find_suppressions(PATH, "x = 1  # ruff: ignore[F401, OFL1200]\n")
    assert [s.codes for s in mixed] == [("OFL1200",)]
