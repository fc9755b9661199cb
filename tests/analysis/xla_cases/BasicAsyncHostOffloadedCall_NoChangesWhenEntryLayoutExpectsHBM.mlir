// XLA host_offloader_test.cc: BasicAsyncHostOffloadedCall_NoChangesWhenEntryLayoutExpectsHBM.
// What XLA asserts: success with nothing moved. A host-memory argument feeds a host-offloaded
// computation whose results are returned directly, and the outputs are declared device
// memory: the host call's results are device buffers, so no host value reaches a device output.
module @jit_async_host_call_entry_expects_hbm attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32> {mhlo.memory_kind = "pinned_host"}) -> (tensor<16xf32> {jax.result_info = "result[0]", mhlo.memory_kind = "device"}, tensor<16xf32> {jax.result_info = "result[1]", mhlo.memory_kind = "device"}) {
    %0:2 = call @host_fn(%arg0) {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>)
    return %0#0, %0#1 : tensor<16xf32>, tensor<16xf32>
  }
  func.func private @host_fn(%arg0: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : (tensor<f32>) -> tensor<16xf32>
    %1 = stablehlo.multiply %arg0, %0 {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<16xf32>
    %2 = stablehlo.add %arg0, %0 {mhlo.frontend_attributes = {_xla_compute_type = "host"}} : tensor<16xf32>
    return %1, %2 : tensor<16xf32>, tensor<16xf32>
  }
}
