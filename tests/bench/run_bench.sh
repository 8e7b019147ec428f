#!/bin/sh
# run_bench.sh -- make bench: ember's figures beside the machine's limits and
# PyTorch 1.13 measured in the same run (tests/bench/torch_bench.py, when
# /usr/bin/python3 can import torch; BENCH_TORCH=0 skips it), as ratios.
# Without torch it prints the stored figures of ../shared/bench/RESULTS.md
# (same machine kind, another day) and says so. micrograd's chain
# (tests/bench/micrograd_ref.py, pure Python) runs in the same run whenever
# $PY runs at all (BENCH_TORCH=0 skips it too, printing stored figures).
# The summary prints each figure beside its target.
B=${BUILD:-build}
PY=${BENCH_PYTHON:-/usr/bin/python3}
export EMBER="$B/ember" # bench.lua's child processes (startup, bytes per node)
out=$(mktemp); trap 'rm -f "$out"' EXIT
echo "== machine limits (cblas_sgemm direct, STREAM-style add)"
"$B/bench_ref" | tee -a "$out"
echo "== ember"
"$B/bench_host" tests/bench/bench.lua | tee -a "$out"
same_run=no
if [ "${BENCH_TORCH:-1}" != 0 ] && "$PY" -c 'import torch' >/dev/null 2>&1; then
  echo "== PyTorch $("$PY" -c 'import torch; print(torch.__version__)'), same run"
  "$PY" tests/bench/torch_bench.py | tee -a "$out" && same_run=yes
else
  echo "== PyTorch: not importable by $PY (apt-get install python3-torch); stored figures below"
  # ../shared/bench/RESULTS.md, this machine kind (medians)
  { echo "torch_add_1elem 1107 ns/op"; echo "torch_add_1elem_grad 1589 ns/op";
    echo "torch_add_1e7_f32_t1 5.48 GB/s"; echo "torch_sum_1e7_f32_t1 45.2 GB/s";
    echo "torch_matmul_f32_n1024_t1 103.0 GFLOP/s"; echo "torch_matmul_f32_n1024_t2 194.1 GFLOP/s";
    echo "torch_chain10k_forward 3.35 us/node"; echo "torch_chain10k_backward 4.45 us/node";
    echo "torch_chain10k_total 7.80 us/node"; echo "torch_startup 985 ms"; } >> "$out"
fi
mg_run=no
if [ "${BENCH_TORCH:-1}" != 0 ] && [ -z "$BENCH_ONLY" ] && "$PY" -c 'pass' >/dev/null 2>&1; then
  echo "== micrograd (pure Python, tests/bench/micrograd_ref.py), same run"
  "$PY" tests/bench/micrograd_ref.py | tee -a "$out" && mg_run=yes
else
  # ../shared/bench/RESULTS.md, this machine kind (medians)
  { echo "micrograd_chain10k_forward 1.344 us/node"; echo "micrograd_chain10k_backward 2.215 us/node";
    echo "micrograd_chain10k_total 3.62 us/node"; } >> "$out"
fi
med() { awk -v n="$1" '$1 == n { print $2 }' "$out"; }
show() { v=$(med "$1"); echo "${v:-n/a}"; }  # for printing: n/a when not measured
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "n/a" }'; }

echo "== ember beside PyTorch ($( [ $same_run = yes ] && echo "measured in this run" || echo "STORED figures, not this run"); medians; shared, noisy machines)"
echo "   speed-up = how many times faster ember is (rates: ember/torch; times: torch/ember); for MiB and bytes, how many times less memory"
# every ember_NAME with a torch_NAME: one line
awk '
  $1 ~ /^ember_/ { n = substr($1, 7); e[n] = $2; u[n] = $3; order[++k] = n }
  $1 ~ /^torch_/ { t[substr($1, 7)] = $2 }
  END {
    for (i = 1; i <= k; i++) {
      n = order[i]
      if (!(n in t) || t[n] <= 0 || e[n] <= 0) continue
      s = (u[n] ~ /^(ns|us|ms|s|MiB|B)(\/|$)/) ? t[n] / e[n] : e[n] / t[n]  # MiB, B: lower is better too
      printf "  %-28s ember %10.2f  torch %10.2f %-8s speed-up %6.2fx\n", n, e[n], t[n], u[n], s
    }
  }' "$out"

[ -n "$BENCH_ONLY" ] && exit 0  # one family (Note [Bench families]): no summary lines
echo "== against the machine and the Lua floor"
# the ratios to the floor are medians of per-round ratios (Note [Interleaved floor], bench.lua)
echo "1-elem add: ember $(med ember_add_1elem) ns; Lua floor (__add + userdata + __gc) $(med lua_floor_add_metamethod) ns; ember/floor = $(show ember_add_1elem_floor) (target <= 1.3); recorded $(med ember_add_1elem_grad) ns = $(show ember_add_1elem_grad_floor) of the floor (target <= 1.6) (interleaved rounds, median of the rounds' ratios)"
echo "add 1e7 t2: $(med ember_add_1e7_f32_t2) GB/s = $(ratio "$(med ember_add_1e7_f32_t2)" "$(med ref_stream_add_1e7_t2)") of STREAM add t2 (target >= 0.80); t1: $(ratio "$(med ember_add_1e7_f32_t1)" "$(med ref_stream_add_1e7_t1)") of STREAM add t1"
for f in exp log tanh sigmoid sin; do
  v=$(med ember_${f}_1e7_f32_t1)
  [ -n "$v" ] && echo "$f 1e7 t1: $v GB/s = $(ratio "$v" "$(med ember_add_1e7_f32_t1)") of ember's add 1e7 t1 (target >= 0.8)"
done
echo "sum 1e3x1e4 t1: dim 2 $(med ember_sum_1e3x1e4_dim2_t1) GB/s, dim 1 $(med ember_sum_1e3x1e4_dim1_t1) GB/s (target: >= sum 1e7 of the same run, $(med ember_sum_1e7_f32_t1))"
echo "matmul 1024: t1 $(ratio "$(med ember_matmul_f32_n1024_t1)" "$(med direct_sgemm_n1024_t1)"), t2 $(ratio "$(med ember_matmul_f32_n1024_t2)" "$(med direct_sgemm_n1024_t2)") of cblas_sgemm called directly in the same process (target >= 0.95)"
echo "chain 10k: forward $(show ember_chain10k_forward) + backward $(show ember_chain10k_backward) = $(show ember_chain10k_total) us/node (target: total <= 0.6, backward <= 0.3)"
echo "  PyTorch $(show torch_chain10k_forward) + $(show torch_chain10k_backward) = $(show torch_chain10k_total) us/node$( [ $same_run = yes ] || echo " (STORED)"): ember $(ratio "$(show torch_chain10k_total)" "$(show ember_chain10k_total)")x faster (target >= 12)"
echo "  micrograd $(show micrograd_chain10k_forward) + $(show micrograd_chain10k_backward) = $(show micrograd_chain10k_total) us/node$( [ $mg_run = yes ] || echo " (STORED)"): ember $(ratio "$(show micrograd_chain10k_total)" "$(show ember_chain10k_total)")x faster (target >= 6)"
echo "chain 1M: forward $(show ember_chain1m_forward) us/node = $(ratio "$(show ember_chain1m_forward)" "$(show ember_chain10k_forward)") of the 10k chain's (target <= 1.2); backward $(show ember_chain1m_backward) us/node; PyTorch $(show torch_chain1m_forward) + $(show torch_chain1m_backward)"
echo "memory per recorded node (1M chain, resident growth / nodes, incl. the saved tanh results' 4 B every third node): ember $(show ember_chain1m_bytes_per_node) B (target <= 200), PyTorch $(show torch_chain1m_bytes_per_node) B"
echo "startup: ember -e '' $(show ember_startup) ms (median of 21; spawning /bin/true the same way: $(show spawn_bin_true) ms); python3 -c 'import torch' $(show torch_startup) ms"
echo "peak resident memory of a script (50 MLP training steps, VmHWM): ember $(show ember_nn_mlp_train_peak_rss) MiB (target <= 50), PyTorch $(show torch_nn_mlp_train_peak_rss) MiB"
