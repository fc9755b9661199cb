// XLA host_offloader_test.cc: MoveToHostInsideWhileLoopBodyShareSameBroadcast.
// What XLA asserts: success. One broadcast is moved to host once and fed to two while-loop
// slots; inside the body each slot is moved to host again (redundantly) and device updates are
// dynamic-update-sliced into it. The while results are the outputs: slots 0 and 1 are declared
// host memory, the remaining four are device.
module @jit_share_same_broadcast attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<i32>, %arg1: tensor<1x1x8x128xf32>, %arg2: tensor<1x1x8x128xf32>) -> (tensor<8x1x8x128xf32> {jax.result_info = "result[0]", mhlo.memory_kind = "pinned_host"}, tensor<8x1x8x128xf32> {jax.result_info = "result[1]", mhlo.memory_kind = "pinned_host"}, tensor<1x1x8x128xf32> {jax.result_info = "result[2]", mhlo.memory_kind = "device"}, tensor<1x1x8x128xf32> {jax.result_info = "result[3]", mhlo.memory_kind = "device"}, tensor<i32> {jax.result_info = "result[4]", mhlo.memory_kind = "device"}, tensor<i32> {jax.result_info = "result[5]", mhlo.memory_kind = "device"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x1x8x128xf32>
    %1 = stablehlo.custom_call @annotate_device_placement(%0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<8x1x8x128xf32>) -> tensor<8x1x8x128xf32>
    %2:6 = stablehlo.while(%iterArg = %1, %iterArg_0 = %1, %iterArg_1 = %arg1, %iterArg_2 = %arg2, %iterArg_3 = %arg0, %iterArg_4 = %arg0) : tensor<8x1x8x128xf32>, tensor<8x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<i32>, tensor<i32>
    cond {
      %c = stablehlo.constant dense<16> : tensor<i32>
      %3 = stablehlo.compare LT, %iterArg_4, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %c = stablehlo.constant dense<0> : tensor<i32>
      %3 = stablehlo.custom_call @annotate_device_placement(%iterArg) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<8x1x8x128xf32>) -> tensor<8x1x8x128xf32>
      %4 = stablehlo.custom_call @annotate_device_placement(%iterArg_0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<8x1x8x128xf32>) -> tensor<8x1x8x128xf32>
      %5 = stablehlo.dynamic_update_slice %3, %iterArg_1, %iterArg_3, %c, %c, %c : (tensor<8x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<8x1x8x128xf32>
      %6 = stablehlo.dynamic_update_slice %4, %iterArg_2, %iterArg_3, %c, %c, %c : (tensor<8x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<8x1x8x128xf32>
      stablehlo.return %5, %6, %iterArg_1, %iterArg_2, %iterArg_3, %iterArg_4 : tensor<8x1x8x128xf32>, tensor<8x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<i32>, tensor<i32>
    }
    return %2#0, %2#1, %2#2, %2#3, %2#4, %2#5 : tensor<8x1x8x128xf32>, tensor<8x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<1x1x8x128xf32>, tensor<i32>, tensor<i32>
  }
}
