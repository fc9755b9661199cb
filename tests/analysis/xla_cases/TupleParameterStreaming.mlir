// XLA host_offloader_test.cc: TupleParameterStreaming.
// What XLA asserts: success. The entry parameter is a tuple whose element 1 is in host memory;
// that element is moved to device and added to element 0. StableHLO from JAX has no tuple
// parameters, so the two elements are flat arguments (argument 1 host) packed into a tuple and
// unpacked again, which keeps the tuple / get-tuple-element path of the original.
module @jit_tuple_parameter_streaming attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x1xi32> {mhlo.memory_kind = "device"}, %arg1: tensor<2x1xi32> {mhlo.memory_kind = "pinned_host"}) -> (tensor<2x1xi32> {jax.result_info = "result", mhlo.memory_kind = "device"}) {
    %0 = stablehlo.tuple %arg0, %arg1 : tuple<tensor<2x1xi32>, tensor<2x1xi32>>
    %1 = stablehlo.get_tuple_element %0[0] : (tuple<tensor<2x1xi32>, tensor<2x1xi32>>) -> tensor<2x1xi32>
    %2 = stablehlo.get_tuple_element %0[1] : (tuple<tensor<2x1xi32>, tensor<2x1xi32>>) -> tensor<2x1xi32>
    %3 = stablehlo.custom_call @annotate_device_placement(%2) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<2x1xi32>) -> tensor<2x1xi32>
    %4 = stablehlo.add %1, %3 : tensor<2x1xi32>
    return %4 : tensor<2x1xi32>
  }
}
