import json
import re

import pytest

from offload_fixer.model import (
    Diagnostic,
    FixOption,
    FunctionRef,
    MemoryFigures,
    Origin,
    OutputInfo,
    Report,
    Span,
    Step,
    XlaVerdict,
    format_output_path,
    parse_output_path,
)


@pytest.mark.parametrize(
    "text, keys",
    [
        ("", ()),
        ("result", ()),
        ("result[0]", (("index", 0),)),
        ("[1]['mu']", (("index", 1), ("key", "mu"))),
        ("['a]b'][2].count", (("key", "a]b"), ("index", 2), ("attr", "count"))),
        ("[\"it's\"]['a\\'b']", (("key", "it's"), ("key", "a'b"))),
        ('["a b"][-1]', (("key", "a b"), ("index", -1))),
        ("[(1, 2)][True]", (("key", (1, 2)), ("key", True))),
    ],
)
def test_output_paths_parse_and_format(text, keys):
    assert parse_output_path(text) == keys
    assert parse_output_path(format_output_path(keys)) == keys


def test_a_key_jax_writes_without_a_literal_is_kept_as_text():
    """``keystr`` of a custom pytree node registered without keys: ``FlattenedIndexKey``."""
    assert parse_output_path("result[0][<flat index 1>]") == (("index", 0), ("key", "<flat index 1>"))


@pytest.mark.parametrize("text", ["[0", "[]", "x", "[0]..a", "[0].1", "['a'] "])
def test_what_is_not_a_pytree_path_is_refused(text):
    with pytest.raises(ValueError, match="not a pytree path"):
        parse_output_path(text)


def test_report_round_trips_through_json():
    span = Span("train.py", 12, 9, 12, 40, "step")
    diagnostic = Diagnostic(
        code="OFL1200",
        severity="error",
        target="tpu",
        message="m",
        explanation="e",
        output_index=1,
        output_path="[1]['mu']",
        origin=Origin("move_to_host", "pinned_host", span, "device_put", "k"),
        trace=(Step("stablehlo.custom_call", "move to host", span), Step("output [1]", "output")),
        span=span,
        fixes=(FixOption("device", "t", "d"),),
        function=FunctionRef("step", "train.py", 10),
        related_outputs=("[2]",),
    )
    report = Report(
        (diagnostic,), "tpu", "0.10.2", "jit_step", FunctionRef("step"), (OutputInfo(1, "[1]", "device", "error"),)
    )
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    assert report.errors == (diagnostic,)


def test_a_confirmed_report_round_trips_with_the_compilers_memory_figures():
    """``--confirm``'s verdicts, the accepted one with its figures: what ``fix REPORT`` and the
    editor read back, and what ``--fix`` compares a fix's figures with."""
    accepted = XlaVerdict("tpu", "libtpu 0.0.42.1", "compiled", memory=MemoryFigures(9216, 5632, host_output=4608))
    report = Report(
        (),
        "tpu",
        "0.10.2",
        xla=XlaVerdict("tpu", "libtpu 0.0.42.1", "rejected", code="OFL1200", output_index=1),
        xla_accepted=accepted,
        xla_rejected_outputs=(1,),
    )
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))) == report


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda d: d["origin"]["span"].update(line="ten"), "Span.line: expected int"),
        (lambda d: d.update(severity="fatal"), "Diagnostic.severity"),
        (lambda d: d.update(trace=7), "Diagnostic.trace"),
        (lambda d: d.update(origin="here"), "Origin: expected an object"),
        (lambda d: d.pop("code"), "Diagnostic: "),
    ],
)
def test_a_corrupt_report_names_the_field(mutate, words):
    """A hand-edited or truncated report is refused where it is wrong, not deep in the fixer."""
    data = Diagnostic(
        "OFL1200",
        "error",
        "tpu",
        "m",
        "e",
        output_path="[1]",
        origin=Origin("move_to_host", "pinned_host", Span("f.py", 3, 5)),
    ).to_dict()
    mutate(data)
    with pytest.raises(TypeError, match=re.escape(words)):
        Diagnostic.from_dict(data)
