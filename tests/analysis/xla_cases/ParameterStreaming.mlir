// XLA host_offloader_test.cc: ParameterStreaming.
// What XLA asserts: success. Argument 0 lives in host memory and is moved to device before it
// is multiplied; both outputs are device values in device memory.
module @jit_parameter_streaming attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x1xi32> {mhlo.memory_kind = "pinned_host"}, %arg1: tensor<2x1xi32> {mhlo.memory_kind = "device"}) -> (tensor<2x1xi32> {jax.result_info = "result[0]", mhlo.memory_kind = "device"}, tensor<2x1xi32> {jax.result_info = "result[1]", mhlo.memory_kind = "device"}) {
    %c = stablehlo.constant dense<2> : tensor<i32>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x1xi32>
    %1 = stablehlo.multiply %arg1, %0 : tensor<2x1xi32>
    %2 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<2x1xi32>) -> tensor<2x1xi32>
    %3 = stablehlo.multiply %1, %2 : tensor<2x1xi32>
    %4 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2x1xi32>
    %5 = stablehlo.multiply %3, %4 : tensor<2x1xi32>
    return %5, %3 : tensor<2x1xi32>, tensor<2x1xi32>
  }
}
