// XLA host_offloader_test.cc: OutputStreamingCustomCallRoot.
// What XLA asserts: success. The MoveToHost is the entry root and the result layout is host
// memory. (In the XLA revision read, its HLO is identical to OutputStreamingWithoutTuple; here
// the annotated value is computed from one argument only, which changes nothing for the walk.)
module @jit_output_streaming_custom_call_root attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x1xi32>) -> (tensor<2x1xi32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {
    %c = stablehlo.constant dense<4> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<2x1xi32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<2x1xi32>
    %2 = stablehlo.custom_call @annotate_device_placement(%1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2x1xi32>) -> tensor<2x1xi32>
    return %2 : tensor<2x1xi32>
  }
}
