"""Remat offload policies that offload nothing (OFL1211 from the traced program): ``run``
reports each of the programs in ``runner_programs/silent_offloads`` at its marked line, the
Python API reports the same programs' functions, and neither reports a policy that does
offload (the probes' and the corrected programs'), whose compiled program holds the residuals
in host memory."""

from __future__ import annotations

import json
import re
import runpy
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import offload_fixer
from offload_fixer import codes, jax_compat
from offload_fixer.model import Report
from tests.cli_support import REPO
from tests.cli_support import offload_fixer as offload_fixer_command

PROGRAMS = sorted((REPO / "tests" / "runner_programs" / "silent_offloads").glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*OFL1211\b")
KINDS = {
    "name_typo_mlp": "which no `checkpoint_name` in the program tags (did you mean 'hidden'?)",
    "name_typo_scanned_decoder": "(did you mean 'decoder_layer_inputs'?)",
    "name_untagged_blocks": "offloads 'attn_out', which no `checkpoint_name` in the program tags:",
    "dot_policy_batched_attention": "(every dot in it has batch dimensions)",
    "custom_policy_matches_nothing": "`offload_double_contractions` matches no operation",
    "destination_device_names": "offloads to `device`, which is not host memory",
    "destination_device_dots": "offloads to `device`, which is not host memory",
    "scan_carry_named": "('state') are never residuals",
    "scan_carry_accumulator": "('total') are never residuals",
}
needs_host_memory = pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED,
    reason=f"jax {jax.__version__} lowers a remat offload without memory spaces in types (JAX >= 0.7.1 only)",
)


def marked_line(program: Path) -> int:
    return next(n for n, text in enumerate(program.read_text().splitlines(), start=1) if EXPECT.search(text))


@needs_host_memory
@pytest.mark.parametrize("program", PROGRAMS, ids=[program.stem for program in PROGRAMS])
def test_run_reports_the_policy_at_its_line(program: Path):
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "findings.json"
        proc = offload_fixer_command("run", "--format", "json", "-o", str(output), str(program))
        report = Report.from_dict(json.loads(output.read_text()))
    assert proc.returncode == 1, proc.stderr
    (finding,) = report.by_code(codes.OFFLOAD_DOES_NOTHING)
    assert finding.span is not None and Path(finding.span.path).resolve() == program
    assert finding.span.line == marked_line(program)
    assert KINDS[program.stem] in finding.message
    assert finding.origin is not None and finding.origin.kind == "offload_policy"


def _mlp_grad(names: list[str], destination: str = "pinned_host"):
    from jax.ad_checkpoint import checkpoint_name

    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=names, offload_src="device", offload_dst=destination
    )

    def mlp(w, x):
        return jnp.sum(jnp.tanh(checkpoint_name(jnp.tanh(x @ w), "hidden") @ w))

    return jax.grad(jax.checkpoint(mlp, policy=policy))


W, X = jax.ShapeDtypeStruct((128, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32)


@needs_host_memory
def test_the_api_reports_what_run_does():
    namespace = runpy.run_path(str(REPO / "tests/runner_programs/silent_offloads/name_typo_mlp.py"))
    params = {"w1": jax.ShapeDtypeStruct((128, 512), jnp.float32), "w2": jax.ShapeDtypeStruct((512, 128), jnp.float32)}
    report = offload_fixer.check(namespace["train_grad"], params, X, X)
    (finding,) = report.by_code(codes.OFFLOAD_DOES_NOTHING)
    assert "did you mean 'hidden'?" in finding.message


@needs_host_memory
@pytest.mark.parametrize(
    "fn",
    [
        _mlp_grad(["hidden"]),
        jax.grad(
            lambda w, x: jnp.sum(
                jax.checkpoint(
                    lambda w, x: jnp.tanh(jnp.tanh(x @ w) @ w),
                    policy=jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host"),
                )(w, x)
            )
        ),
    ],
    ids=["names", "unbatched dots"],
)
def test_a_policy_that_offloads_is_not_reported(fn):
    assert not offload_fixer.check(fn, W, X).by_code(codes.OFFLOAD_DOES_NOTHING)


@needs_host_memory
def test_a_policy_that_offloads_is_confirmed_by_the_compiled_memory(tpu_compiler):
    """The signal the finding stands for: the typo's program holds no host memory, the
    corrected one holds the offloaded activation there."""
    typo = offload_fixer.check(_mlp_grad(["hiden"]), W, X, confirm=True)
    right = offload_fixer.check(_mlp_grad(["hidden"]), W, X, confirm=True)
    assert typo.by_code(codes.OFFLOAD_DOES_NOTHING) and not right.by_code(codes.OFFLOAD_DOES_NOTHING)
    assert typo.xla is not None and typo.xla.memory is not None and typo.xla.memory.host_total == 0
    assert right.xla is not None and right.xla.memory is not None and right.xla.memory.host_total > 0
