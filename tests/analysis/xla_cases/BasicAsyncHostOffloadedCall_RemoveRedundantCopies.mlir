// XLA host_offloader_test.cc: BasicAsyncHostOffloadedCall_RemoveRedundantCopies.
// What XLA asserts: success. A host-memory argument feeds a host-offloaded computation
// (compute_on("device_host"): a call with _xla_compute_type = "host", which XLA runs as an
// async host call); both results are moved to host and returned as host-memory outputs, and XLA
// drops the redundant moves by placing the results in host memory directly.
module @jit_async_host_call_remove_redundant_copies attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32> {mhlo.memory_kind = "pinned_host"}) -> (tensor<16xf32> {jax.result_info = "result[0]", mhlo.memory_kind = "pinned_host"}, tensor<16xf32> {jax.result_info = "result[1]", mhlo.memory_kind = "pinned_host"}) {
    %0:2 = call @host_fn(%arg0) {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
    %1 = stablehlo.custom_call @annotate_device_placement(%0#0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    %2 = stablehlo.custom_call @annotate_device_placement(%0#1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    return %1, %2 : tensor<16xf32>, tensor<16xf32>
  }
  func.func private @host_fn(%arg0: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : (tensor<f32>) -> tensor<16xf32>
    %1 = stablehlo.multiply %arg0, %0 {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<16xf32>
    %2 = stablehlo.add %arg0, %0 {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<16xf32>
    return %1, %2 : tensor<16xf32>, tensor<16xf32>
  }
}
