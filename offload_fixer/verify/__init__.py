"""Verification, the stage between plan and rewrite: a fix is written only where its fixed
source lowers with the call the run recorded, the analysis of that lowering keeps none of the
errors it claims to remove, and the target's compiler, where installed, compiles it
(:class:`~offload_fixer.verify.stage.Verifier`). The fixed function is rebuilt in a copy of the
running program's namespace (:mod:`~offload_fixer.verify.namespace`), or for a saved report
imported where that runs nothing (:mod:`~offload_fixer.verify.fixed_modules`). Nothing is
imported here: ``check`` loads none of it."""
