// XLA host_offloader_test.cc: ParameterAndOutputStreamingPassThrough.
// What XLA asserts: success. A host-memory argument is returned unchanged as a host-memory
// output: the streamed parameter reaches the root, whose layout is host memory.
module @jit_parameter_and_output_streaming_pass_through attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x1xi32> {mhlo.memory_kind = "pinned_host"}) -> (tensor<2x1xi32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {
    return %arg0 : tensor<2x1xi32>
  }
}
