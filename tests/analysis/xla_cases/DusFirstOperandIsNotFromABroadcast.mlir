// XLA host_offloader_test.cc: DusFirstOperandIsNotFromABroadcast.
// What XLA asserts: the pass fails. A value moved to host is dynamic-update-sliced (scan-style
// streaming) into a buffer that is an entry argument rather than a broadcast, so XLA cannot
// allocate the host buffer ("first operand is not the result of a broadcast").
module @jit_dus_first_operand_not_broadcast attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1x8x8xf32>, %arg1: tensor<i32>, %arg2: tensor<2x8x8xf32>) -> (tensor<1x8x8xf32> {jax.result_info = "result", mhlo.memory_kind = "device"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
    %1 = stablehlo.dynamic_update_slice %arg2, %0, %arg1, %c, %c : (tensor<2x8x8xf32>, tensor<1x8x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x8x8xf32>
    %2 = stablehlo.dynamic_slice %1, %arg1, %c, %c, sizes = [1, 8, 8] : (tensor<2x8x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x8xf32>
    %3 = stablehlo.custom_call @annotate_device_placement(%2) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
    return %3 : tensor<1x8x8xf32>
  }
}
