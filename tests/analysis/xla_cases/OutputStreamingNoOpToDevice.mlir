// XLA host_offloader_test.cc: OutputStreamingNoOpToDevice.
// What XLA asserts: success. A MoveToDevice on a device argument (no earlier MoveToHost) is a
// no-op that is simply removed; the following MoveToHost feeds the host-memory output.
module @jit_output_streaming_noop_to_device attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x1xi32>) -> (tensor<2x1xi32> {jax.result_info = "result", mhlo.memory_kind = "pinned_host"}) {
    %0 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<2x1xi32>) -> tensor<2x1xi32>
    %1 = stablehlo.custom_call @annotate_device_placement(%0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<2x1xi32>) -> tensor<2x1xi32>
    return %1 : tensor<2x1xi32>
  }
}
