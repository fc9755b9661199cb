// XLA host_offloader_test.cc: BasicDusDsDusAnnotationOnWrongSide.
// What XLA asserts: the pass fails. The move to host is placed after the dynamic-update-slice
// instead of on its update, and the annotation declares the shape of one slice (1x8x8) while
// its operand is the whole buffer (2x8x8), exactly as in the XLA test. Reading host_offloader.cc,
// the failure comes from that shape mismatch: removing the MoveToHost replaces its uses with its
// operand, and HloInstruction::ReplaceAllUsesWith rejects incompatible shapes.
module @jit_dus_annotation_on_wrong_side attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1x8x8xf32>, %arg1: tensor<i32>) -> (tensor<1x8x8xf32> {jax.result_info = "result", mhlo.memory_kind = "device"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x8x8xf32>
    %1 = stablehlo.dynamic_update_slice %0, %arg0, %arg1, %c, %c : (tensor<2x8x8xf32>, tensor<1x8x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x8x8xf32>
    %2 = stablehlo.custom_call @annotate_device_placement(%1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2x8x8xf32>) -> tensor<1x8x8xf32>
    %3 = stablehlo.dynamic_slice %2, %arg1, %c, %c, sizes = [1, 8, 8] : (tensor<1x8x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x8xf32>
    %4 = stablehlo.custom_call @annotate_device_placement(%3) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<1x8x8xf32>) -> tensor<1x8x8xf32>
    return %4 : tensor<1x8x8xf32>
  }
}
