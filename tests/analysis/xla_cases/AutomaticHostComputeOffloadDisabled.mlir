// XLA host_offloader_test.cc: AutomaticHostComputeOffloadDisabled (and TanhOnHostMemory).
// What XLA asserts: a tanh applied to a value that was moved to host is device compute in host
// memory. By default XLA converts it to host compute with a warning (TanhOnHostMemory); with
// xla_disable_automatic_host_compute_offload set, the pass fails with InvalidArgument
// ("Automatic host compute offloading is disabled."). The output is moved back to device.
module @jit_tanh_on_host_memory attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16xf32>) -> (tensor<16xf32> {jax.result_info = "result", mhlo.memory_kind = "device"}) {
    %0 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<16xf32>) -> tensor<16xf32>
    %1 = stablehlo.tanh %0 : tensor<16xf32>
    %2 = stablehlo.custom_call @annotate_device_placement(%1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<16xf32>) -> tensor<16xf32>
    return %2 : tensor<16xf32>
  }
}
