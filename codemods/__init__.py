"""libcst codemod commands that fix host-offload outputs XLA rejects (error 1200).

* :class:`codemods.move_to_device.MoveToDeviceCommand` — move the value back to device;
* :class:`codemods.host_output.HostOutputCommand` — declare the output host memory in
  ``out_shardings``.

They take plain :class:`codemods.targets.FixTarget` values (lines, pytree paths, spelling)
and import neither JAX nor MLIR, so they run anywhere libcst does, including
``python -m libcst.tool codemod``.
"""
