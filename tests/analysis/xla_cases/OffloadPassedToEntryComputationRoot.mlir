// XLA host_offloader_test.cc: OffloadPassedToEntryComputationRoot.
// What XLA asserts: success. A constant is moved to host and straight back to device, and the
// device copy is the only output (device memory): the MoveToDevice ends the host path.
module @jit_offload_passed_to_entry_root attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> (tensor<i32> {jax.result_info = "result[0]", mhlo.memory_kind = "device"}) {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = stablehlo.custom_call @annotate_device_placement(%c) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<i32>) -> tensor<i32>
    %1 = stablehlo.custom_call @annotate_device_placement(%0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<i32>) -> tensor<i32>
    return %1 : tensor<i32>
  }
}
