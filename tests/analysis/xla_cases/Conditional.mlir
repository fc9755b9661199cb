// XLA host_offloader_test.cc: Conditional.
// What XLA asserts: success, and every result of the conditional ends up in host memory.
// Arguments 0 and 1 live in host memory, argument 2 on device; all three are aliased to the
// outputs. Branch 0 returns the two host arguments and moves the device one to host; branch 1
// moves values to device, adds them and moves the sums to host. After the conditional, results
// 0 and 1 are moved to host (outputs declared host memory) and result 2 is moved to device.
// JAX's stablehlo.case captures the arguments instead of passing operand tuples per branch.
module @jit_conditional_update attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1x128xf32> {mhlo.memory_kind = "pinned_host", tf.aliasing_output = 0 : i32}, %arg1: tensor<1x128xf32> {mhlo.memory_kind = "pinned_host", tf.aliasing_output = 1 : i32}, %arg2: tensor<1x128xf32> {mhlo.memory_kind = "device", tf.aliasing_output = 2 : i32}, %arg3: tensor<i32>) -> (tensor<1x128xf32> {jax.result_info = "result[0]", mhlo.memory_kind = "pinned_host"}, tensor<1x128xf32> {jax.result_info = "result[1]", mhlo.memory_kind = "pinned_host"}, tensor<1x128xf32> {jax.result_info = "result[2]", mhlo.memory_kind = "device"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.compare GE, %arg3, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %1 = stablehlo.convert %0 : (tensor<i1>) -> tensor<i32>
    %2:3 = "stablehlo.case"(%1) ({
      %6 = stablehlo.custom_call @annotate_device_placement(%arg2) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
      stablehlo.return %arg0, %arg1, %6 : tensor<1x128xf32>, tensor<1x128xf32>, tensor<1x128xf32>
    }, {
      %6 = stablehlo.custom_call @annotate_device_placement(%arg0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
      %7 = stablehlo.custom_call @annotate_device_placement(%arg1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
      %8 = stablehlo.add %6, %7 : tensor<1x128xf32>
      %9 = stablehlo.custom_call @annotate_device_placement(%8) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
      %10 = stablehlo.custom_call @annotate_device_placement(%arg2) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
      %11 = stablehlo.add %7, %10 : tensor<1x128xf32>
      %12 = stablehlo.custom_call @annotate_device_placement(%11) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
      %13 = stablehlo.add %8, %10 : tensor<1x128xf32>
      %14 = stablehlo.custom_call @annotate_device_placement(%13) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
      stablehlo.return %9, %12, %14 : tensor<1x128xf32>, tensor<1x128xf32>, tensor<1x128xf32>
    }) : (tensor<i32>) -> (tensor<1x128xf32>, tensor<1x128xf32>, tensor<1x128xf32>)
    %3 = stablehlo.custom_call @annotate_device_placement(%2#0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
    %4 = stablehlo.custom_call @annotate_device_placement(%2#1) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
    %5 = stablehlo.custom_call @annotate_device_placement(%2#2) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "device"}} : (tensor<1x128xf32>) -> tensor<1x128xf32>
    return %3, %4, %5 : tensor<1x128xf32>, tensor<1x128xf32>, tensor<1x128xf32>
  }
}
