// XLA host_offloader_test.cc: OutputStreamingInScanLoop.
// What XLA asserts: success. Inside a scan-like while loop a row computed on device is moved
// to host (then reshaped, a bitcast) and dynamic-update-sliced into a carry buffer that starts
// as a broadcast; the buffer is returned as flat output 1, declared host memory. (XLA's body
// derives the row through all-gather/reduce; a reduce stands in for that device compute.)
module @jit_output_streaming_in_scan_loop attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x1xf32>) -> (tensor<f32> {jax.result_info = "result[0]", mhlo.memory_kind = "device"}, tensor<8x2xf32> {jax.result_info = "result[1]", mhlo.memory_kind = "pinned_host"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8x2xf32>
    %1:3 = stablehlo.while(%iterArg = %c, %iterArg_1 = %0, %iterArg_2 = %arg0) : tensor<i32>, tensor<8x2xf32>, tensor<4x1xf32>
    cond {
      %c_3 = stablehlo.constant dense<8> : tensor<i32>
      %2 = stablehlo.compare LT, %iterArg, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %c_3 = stablehlo.constant dense<1> : tensor<i32>
      %c_4 = stablehlo.constant dense<0> : tensor<i32>
      %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %2 = stablehlo.add %iterArg, %c_3 : tensor<i32>
      %3 = stablehlo.broadcast_in_dim %iterArg_2, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x2xf32>
      %4 = stablehlo.reduce(%3 init: %cst_5) applies stablehlo.add across dimensions = [0] : (tensor<4x2xf32>, tensor<f32>) -> tensor<2xf32>
      %5 = stablehlo.custom_call @annotate_device_placement(%4) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2xf32>) -> tensor<2xf32>
      %6 = stablehlo.reshape %5 : (tensor<2xf32>) -> tensor<1x2xf32>
      %7 = stablehlo.dynamic_update_slice %iterArg_1, %6, %iterArg, %c_4 : (tensor<8x2xf32>, tensor<1x2xf32>, tensor<i32>, tensor<i32>) -> tensor<8x2xf32>
      stablehlo.return %2, %7, %iterArg_2 : tensor<i32>, tensor<8x2xf32>, tensor<4x1xf32>
    }
    return %cst, %1#1 : tensor<f32>, tensor<8x2xf32>
  }
}
