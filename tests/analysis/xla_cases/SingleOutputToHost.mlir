// XLA host_offloader_test.cc: SingleOutputToHost.
// What XLA's test asserts: success, with the entry result layout switched to host memory (main
// branch: an output layout that was not explicitly customised is rewritten instead of failing).
// What the released compilers do (libtpu 0.0.42.1, jax-cuda12-plugin 0.10.2): compile too, on
// both targets, because the MoveToHost is the root of a single-output entry computation and
// HandleMoveToHostCustomCall replaces it with a copy to host (no walk, no error 1200). Expected
// verdict: "repaired".
module @jit_single_output_to_host attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<3xf32>
    %1 = stablehlo.custom_call @annotate_device_placement(%0) {backend_config = "", has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}} : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}
