// XLA host_offloader_test.cc: InvalidOutputStreaming.
// What XLA asserts: the pass fails. A product of the two device arguments is moved to host
// and returned as flat output 0, but no output layout is host memory (TPU-tiled layouts),
// so the host offloader rejects the module with error 1200 on output 0.
module @jit_invalid_output_streaming attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x1xi32>, %arg1: tensor<2x1xi32>) -> (tensor<2x1xi32> {jax.result_info = "result[0]", mhlo.memory_kind = "device"}, tensor<2x1xi32> {jax.result_info = "result[1]", mhlo.memory_kind = "device"}) {
    %c = stablehlo.constant dense<2> : tensor<i32>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x1xi32>
    %1 = stablehlo.multiply %arg1, %0 : tensor<2x1xi32>
    %2 = stablehlo.multiply %1, %arg0 : tensor<2x1xi32>
    %3 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<2x1xi32>
    %4 = stablehlo.multiply %2, %3 : tensor<2x1xi32>
    %5 = stablehlo.custom_call @annotate_device_placement(%4) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2x1xi32>) -> tensor<2x1xi32>
    return %5, %2 : tensor<2x1xi32>, tensor<2x1xi32>
  }
}
