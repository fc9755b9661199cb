// XLA host_offloader_test.cc: TupleOutputMixedMemorySpaces.
// What XLA asserts: success with a mixed result layout: output 0 (moved to device) and output 2
// (plain device compute) stay device memory, output 1 (moved to host) becomes host memory. As in
// SingleOutputToHost no output layout was set, so only newest XLA on untiled layouts ("gpu")
// rewrites it; "tpu" and "gpu-legacy" fail with error 1200 on output 1.
module @jit_tuple_output_mixed_memory_spaces attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32> {jax.result_info = "result[0]"}, tensor<3xf32> {jax.result_info = "result[1]"}, tensor<3xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<3xf32>
    %1 = stablehlo.custom_call @annotate_device_placement(%0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<3xf32>) -> tensor<3xf32>
    %2 = stablehlo.add %arg0, %arg0 : tensor<3xf32>
    %3 = stablehlo.custom_call @annotate_device_placement(%2) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<3xf32>) -> tensor<3xf32>
    %4 = stablehlo.subtract %arg0, %arg0 : tensor<3xf32>
    return %1, %3, %4 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
}
