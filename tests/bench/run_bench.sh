#!/bin/sh
# run_bench.sh -- make bench: ember's figures beside the machine's limits and
# PyTorch 1.13's figures on this machine (../shared/bench/RESULTS.md), as ratios.
B=${BUILD:-build}
out=$(mktemp); trap 'rm -f "$out"' EXIT
echo "== machine limits (cblas_sgemm direct, STREAM-style add)"
"$B/bench_ref" | tee -a "$out"
echo "== ember"
"$B/bench_host" tests/bench/bench.lua | tee -a "$out"
med() { awk -v n="$1" '$1 == n { print $2 }' "$out"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
echo "== ratios (medians; these machines are shared and noisy)"
# PyTorch 1.13 anchors from ../shared/bench/RESULTS.md (same machine kind)
TORCH_ADD1_NS=1107; TORCH_ADD1E7_T1=5.48; TORCH_SUM1E7_T1=45.2; TORCH_MM_T1=103.0; TORCH_MM_T2=194.1
echo "1-elem add: ember $(med ember_add_1elem) ns/op; torch 1.13: $TORCH_ADD1_NS ns (torch/ember = $(ratio $TORCH_ADD1_NS "$(med ember_add_1elem)")x; target < 500 ns)"
echo "  Lua floor now: $(med lua_floor_add_metamethod) ns (184-207 ns on a quiet machine per RESULTS.md); ember/floor = $(ratio "$(med ember_add_1elem)" "$(med lua_floor_add_metamethod)")"
echo "add 1e7 t2: $(med ember_add_1e7_f32_t2) GB/s = $(ratio "$(med ember_add_1e7_f32_t2)" "$(med ref_stream_add_1e7_t2)") of STREAM add t2 (target >= 0.80); torch t1 out-of-place $TORCH_ADD1E7_T1 GB/s"
echo "add 1e7 t1: $(med ember_add_1e7_f32_t1) GB/s = $(ratio "$(med ember_add_1e7_f32_t1)" "$(med ref_stream_add_1e7_t1)") of STREAM add t1"
echo "sum 1e7 t1: $(med ember_sum_1e7_f32_t1) GB/s; torch t1 $TORCH_SUM1E7_T1 GB/s (ember/torch = $(ratio "$(med ember_sum_1e7_f32_t1)" $TORCH_SUM1E7_T1))"
echo "sum 1e3x1e4 t1: dim 2 $(med ember_sum_1e3x1e4_dim2_t1) GB/s, dim 1 $(med ember_sum_1e3x1e4_dim1_t1) GB/s; t2: dim 2 $(med ember_sum_1e3x1e4_dim2_t2), dim 1 $(med ember_sum_1e3x1e4_dim1_t2) GB/s (target: >= sum 1e7 of the same run)"
echo "reductions 1e7 t1/t2 GB/s: prod $(med ember_prod_1e7_f32_t1)/$(med ember_prod_1e7_f32_t2), amax $(med ember_amax_1e7_f32_t1)/$(med ember_amax_1e7_f32_t2) (dim 1 of 1e3x1e4: $(med ember_amax_1e3x1e4_dim1_t1)/$(med ember_amax_1e3x1e4_dim1_t2)), var $(med ember_var_1e7_f32_t1)/$(med ember_var_1e7_f32_t2) (dim 2: $(med ember_var_1e3x1e4_dim2_t1)/$(med ember_var_1e3x1e4_dim2_t2); two passes), norm $(med ember_norm_1e7_f32_t1)/$(med ember_norm_1e7_f32_t2)"
echo "matmul 1024 t2: $(med ember_matmul_f32_n1024_t2) GFLOP/s = $(ratio "$(med ember_matmul_f32_n1024_t2)" "$(med direct_sgemm_n1024_t2)") of cblas_sgemm called directly in the same process (target >= 0.95); torch t2 $TORCH_MM_T2"
echo "1-elem add, requires_grad: ember $(med ember_add_1elem_grad) ns/op; torch 1.13: 1589 ns (target < 1000 ns)"
echo "chain 10k: forward $(med ember_chain10k_forward) + backward $(med ember_chain10k_backward) us/node; torch 3.35 + 4.45, micrograd 1.34 + 2.22 (target backward < 0.5)"
echo "matmul 1024 t1: $(med ember_matmul_f32_n1024_t1) GFLOP/s = $(ratio "$(med ember_matmul_f32_n1024_t1)" "$(med direct_sgemm_n1024_t1)") of direct sgemm; torch t1 $TORCH_MM_T1 (ember/torch = $(ratio "$(med ember_matmul_f32_n1024_t1)" $TORCH_MM_T1))"
