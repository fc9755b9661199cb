// XLA host_offloader_test.cc: BasicAsyncHostOffloadedCall_RemoveOnlyRedundantCopies.
// What XLA asserts: success. As RemoveRedundantCopies, but result 0 of the host call is also
// used by device compute (an unused add), so XLA keeps that result on device and copies it to
// host for the output, while result 1 is placed on host directly. Both outputs are host memory.
module @jit_async_host_call_remove_only_redundant_copies attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32> {mhlo.memory_kind = "pinned_host"}) -> (tensor<16xf32> {jax.result_info = "result[0]", mhlo.memory_kind = "pinned_host"}, tensor<16xf32> {jax.result_info = "result[1]", mhlo.memory_kind = "pinned_host"}) {
    %0:2 = call @host_fn(%arg0) {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
    %1 = stablehlo.add %0#0, %0#0 : tensor<16xf32>
    %2 = stablehlo.custom_call @annotate_device_placement(%0#0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    %3 = stablehlo.custom_call @annotate_device_placement(%0#1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    return %2, %3 : tensor<16xf32>, tensor<16xf32>
  }
  func.func private @host_fn(%arg0: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : (tensor<f32>) -> tensor<16xf32>
    %1 = stablehlo.multiply %arg0, %0 {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<16xf32>
    %2 = stablehlo.add %arg0, %0 {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<16xf32>
    return %1, %2 : tensor<16xf32>, tensor<16xf32>
  }
}
