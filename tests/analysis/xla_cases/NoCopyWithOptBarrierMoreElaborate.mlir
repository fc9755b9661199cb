// XLA host_offloader_test.cc: NoCopyWithOptBarrierMoreElaborate.
// What XLA asserts: success, with every host value moved back before use. Three values derived
// from the argument by sine/cosine are moved to host, pass through one optimization barrier
// together with a device constant, and each is moved back to device before the final products;
// the single output is a device value.
module @jit_opt_barrier_more_elaborate attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32>) -> (tensor<16xf32> {jax.result_info = "result", mhlo.memory_kind = "device"}) {
    %0 = stablehlo.cosine %arg0 : tensor<16xf32>
    %1 = stablehlo.custom_call @annotate_device_placement(%0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    %2 = stablehlo.sine %arg0 : tensor<16xf32>
    %3 = stablehlo.cosine %2 : tensor<16xf32>
    %4 = stablehlo.custom_call @annotate_device_placement(%3) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    %5 = stablehlo.sine %2 : tensor<16xf32>
    %6 = stablehlo.cosine %5 : tensor<16xf32>
    %7 = stablehlo.custom_call @annotate_device_placement(%6) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %8:4 = stablehlo.optimization_barrier %1, %4, %7, %cst : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f32>
    %9 = stablehlo.broadcast_in_dim %8#3, dims = [] : (tensor<f32>) -> tensor<16xf32>
    %10 = stablehlo.custom_call @annotate_device_placement(%8#2) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<16xf32>) -> tensor<16xf32>
    %11 = stablehlo.multiply %9, %10 : tensor<16xf32>
    %12 = stablehlo.custom_call @annotate_device_placement(%8#1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<16xf32>) -> tensor<16xf32>
    %13 = stablehlo.multiply %11, %12 : tensor<16xf32>
    %14 = stablehlo.custom_call @annotate_device_placement(%8#0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<16xf32>) -> tensor<16xf32>
    %15 = stablehlo.multiply %13, %14 : tensor<16xf32>
    return %15 : tensor<16xf32>
  }
}
