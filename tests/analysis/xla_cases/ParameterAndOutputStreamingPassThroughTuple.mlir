// XLA host_offloader_test.cc: ParameterAndOutputStreamingPassThroughTuple.
// What XLA asserts: success. As ParameterAndOutputStreamingPassThrough, but the host argument
// is wrapped in a one-element tuple and taken back out before it is returned.
module @jit_parameter_and_output_streaming_pass_through_tuple attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x1xi32> {mhlo.memory_kind = "pinned_host"}) -> (tensor<2x1xi32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {
    %0 = stablehlo.tuple %arg0 : tuple<tensor<2x1xi32>>
    %1 = stablehlo.get_tuple_element %0[0] : (tuple<tensor<2x1xi32>>) -> tensor<2x1xi32>
    return %1 : tensor<2x1xi32>
  }
}
