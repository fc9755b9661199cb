// XLA host_offloader_test.cc: AvoidRedundantCopiesToHost.
// What XLA asserts: success (and no extra copies). A while loop slices rows of a device argument,
// moves each to host and dynamic-update-slices it into a broadcast buffer; the loop condition
// reads only the device argument. After the loop the already-host buffer is moved to host once
// more (a redundant annotation) and returned as the single output, declared host memory.
module @jit_avoid_redundant_copies_to_host attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64x128xbf16>) -> (tensor<64x128xbf16> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<64x128xbf16>
    %1:3 = stablehlo.while(%iterArg = %c, %iterArg_0 = %0, %iterArg_1 = %arg0) : tensor<i32>, tensor<64x128xbf16>, tensor<64x128xbf16>
    cond {
      %c_2 = stablehlo.constant dense<8> : tensor<i32>
      %c_3 = stablehlo.constant dense<64> : tensor<i32>
      %c_4 = stablehlo.constant dense<0> : tensor<i32>
      %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
      %false = stablehlo.constant dense<false> : tensor<i1>
      %3 = stablehlo.multiply %iterArg, %c_2 : tensor<i32>
      %4 = stablehlo.compare LT, %3, %c_3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %5 = stablehlo.dynamic_slice %iterArg_1, %3, %c_4, sizes = [8, 128] : (tensor<64x128xbf16>, tensor<i32>, tensor<i32>) -> tensor<8x128xbf16>
      %6 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<bf16>) -> tensor<8x128xbf16>
      %7 = stablehlo.compare GT, %5, %6, FLOAT : (tensor<8x128xbf16>, tensor<8x128xbf16>) -> tensor<8x128xi1>
      %8 = stablehlo.reduce(%7 init: %false) applies stablehlo.or across dimensions = [0, 1] : (tensor<8x128xi1>, tensor<i1>) -> tensor<i1>
      %9 = stablehlo.and %4, %8 : tensor<i1>
      stablehlo.return %9 : tensor<i1>
    } do {
      %c_2 = stablehlo.constant dense<1> : tensor<i32>
      %c_3 = stablehlo.constant dense<8> : tensor<i32>
      %c_4 = stablehlo.constant dense<0> : tensor<i32>
      %3 = stablehlo.add %iterArg, %c_2 : tensor<i32>
      %4 = stablehlo.multiply %iterArg, %c_3 : tensor<i32>
      %5 = stablehlo.dynamic_slice %iterArg_1, %4, %c_4, sizes = [8, 128] : (tensor<64x128xbf16>, tensor<i32>, tensor<i32>) -> tensor<8x128xbf16>
      %6 = stablehlo.custom_call @annotate_device_placement(%5) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<8x128xbf16>) -> tensor<8x128xbf16>
      %7 = stablehlo.dynamic_update_slice %iterArg_0, %6, %4, %c_4 : (tensor<64x128xbf16>, tensor<8x128xbf16>, tensor<i32>, tensor<i32>) -> tensor<64x128xbf16>
      stablehlo.return %3, %7, %iterArg_1 : tensor<i32>, tensor<64x128xbf16>, tensor<64x128xbf16>
    }
    %2 = stablehlo.custom_call @annotate_device_placement(%1#1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<64x128xbf16>) -> tensor<64x128xbf16>
    return %2 : tensor<64x128xbf16>
  }
}
