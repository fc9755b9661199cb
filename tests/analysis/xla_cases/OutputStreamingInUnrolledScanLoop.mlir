// XLA host_offloader_test.cc: OutputStreamingInUnrolledScanLoop.
// What XLA asserts: success. A scan whose first iteration was peeled: the loop body moves the
// previous row to host and dynamic-update-slices it into a broadcast buffer carried by the
// loop; after the loop the last row is moved to host and written the same way, and that final
// dynamic-update-slice is the single output, declared host memory.
module @jit_output_streaming_in_unrolled_scan_loop attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x16x8xi32>) -> (tensor<16x16x8xi32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<16x16x8xi32>
    %1 = stablehlo.slice %arg0 [0:1, 0:16, 0:8] : (tensor<16x16x8xi32>) -> tensor<1x16x8xi32>
    %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<1x16x8xi32>
    %3 = stablehlo.add %1, %2 : tensor<1x16x8xi32>
    %4 = stablehlo.reshape %3 : (tensor<1x16x8xi32>) -> tensor<16x8xi32>
    %5:5 = stablehlo.while(%iterArg = %c, %iterArg_1 = %0, %iterArg_2 = %arg0, %iterArg_3 = %c_0, %iterArg_4 = %4) : tensor<i32>, tensor<16x16x8xi32>, tensor<16x16x8xi32>, tensor<i32>, tensor<16x8xi32>
    cond {
      %c_5 = stablehlo.constant dense<16> : tensor<i32>
      %10 = stablehlo.compare LT, %iterArg, %c_5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %10 : tensor<i1>
    } do {
      %c_5 = stablehlo.constant dense<1> : tensor<i32>
      %c_6 = stablehlo.constant dense<0> : tensor<i32>
      %10 = stablehlo.add %iterArg, %c_5 : tensor<i32>
      %11 = stablehlo.custom_call @annotate_device_placement(%iterArg_4) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16x8xi32>) -> tensor<16x8xi32>
      %12 = stablehlo.reshape %11 : (tensor<16x8xi32>) -> tensor<1x16x8xi32>
      %13 = stablehlo.dynamic_update_slice %iterArg_1, %12, %iterArg_3, %c_6, %c_6 : (tensor<16x16x8xi32>, tensor<1x16x8xi32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x16x8xi32>
      %14 = stablehlo.dynamic_slice %iterArg_2, %iterArg, %c_6, %c_6, sizes = [1, 16, 8] : (tensor<16x16x8xi32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x16x8xi32>
      %15 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<i32>) -> tensor<1x16x8xi32>
      %16 = stablehlo.add %14, %15 : tensor<1x16x8xi32>
      %17 = stablehlo.reshape %16 : (tensor<1x16x8xi32>) -> tensor<16x8xi32>
      stablehlo.return %10, %13, %iterArg_2, %iterArg, %17 : tensor<i32>, tensor<16x16x8xi32>, tensor<16x16x8xi32>, tensor<i32>, tensor<16x8xi32>
    }
    %6 = stablehlo.custom_call @annotate_device_placement(%5#4) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16x8xi32>) -> tensor<16x8xi32>
    %7 = stablehlo.reshape %6 : (tensor<16x8xi32>) -> tensor<1x16x8xi32>
    %8 = stablehlo.dynamic_update_slice %5#1, %7, %5#3, %c_0, %c_0 : (tensor<16x16x8xi32>, tensor<1x16x8xi32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<16x16x8xi32>
    return %8 : tensor<16x16x8xi32>
  }
}
