// XLA host_offloader_test.cc: ParameterStreamingFeedingIntoWhile.
// What XLA asserts: success. A host-memory argument enters a while loop as carry slot 1; the
// body moves it to device, accumulates it into slot 2 and writes the device copy back into
// slot 1. Only slot 2 (a device value) is returned, in device memory.
module @jit_parameter_streaming_feeding_into_while attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x16x16xbf16> {mhlo.memory_kind = "pinned_host"}) -> (tensor<2x16x16xbf16> {jax.result_info = "result", mhlo.memory_kind = "device"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<2x16x16xbf16>
    %1:3 = stablehlo.while(%iterArg = %c, %iterArg_0 = %arg0, %iterArg_1 = %0) : tensor<i32>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>
    cond {
      %c_2 = stablehlo.constant dense<16> : tensor<i32>
      %2 = stablehlo.compare LT, %iterArg, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %c_2 = stablehlo.constant dense<1> : tensor<i32>
      %2 = stablehlo.custom_call @annotate_device_placement(%iterArg_0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<2x16x16xbf16>) -> tensor<2x16x16xbf16>
      %3 = stablehlo.add %2, %iterArg_1 : tensor<2x16x16xbf16>
      %4 = stablehlo.add %iterArg, %c_2 : tensor<i32>
      stablehlo.return %4, %2, %3 : tensor<i32>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>
    }
    return %1#2 : tensor<2x16x16xbf16>
  }
}
