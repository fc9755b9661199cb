// XLA host_offloader_test.cc: SingleOutputToHost.
// What XLA asserts: success, and the entry result layout is switched to host memory. The
// module has no entry layout (default, untiled layouts), the MoveToHost is the root, and newest
// XLA rewrites an output layout that was not explicitly customised instead of failing. That is
// the "gpu" target; TPU layouts are tiled and older XLA never rewrites, so "tpu" and
// "gpu-legacy" fail with error 1200 on the output.
module @jit_single_output_to_host attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<3xf32>
    %1 = stablehlo.custom_call @annotate_device_placement(%0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}
