"""bench_index_torch.py -- PyTorch 1.13 side of tests/bench/bench_index.lua (same workloads,
same lines; indices 0-based here; wall clock). /usr/bin/python3 tests/bench/bench_index_torch.py [threads]"""
import os, re, sys, time, torch
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
torch.manual_seed(0)
only = os.environ.get("BENCH_INDEX_ONLY")
def med(f, reps):
    f()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    ts.sort(); return ts[len(ts) // 2]
def run(name, n, f):
    if not only or re.search(only, name):
        print("%s n=%d %.3f ms" % (name, n, 1e3 * med(f, 7)))
for N in (1000, 3162):
    x = torch.randn(N, N); idx = (torch.rand(N, N) * N).long(); src = torch.randn(N, N)
    rows = (torch.rand(N) * N).long(); z = torch.zeros(N, N); n = N * N
    run("gather_d2", n, lambda: x.gather(1, idx))
    run("gather_d1", n, lambda: x.gather(0, idx))
    run("scatter_add_d2", n, lambda: z.scatter_add(1, idx, src))
    run("scatter_add_d1", n, lambda: z.scatter_add(0, idx, src))
    run("index_select_d1", n, lambda: x.index_select(0, rows))
    run("index_select_d2", n, lambda: x.index_select(1, rows))
    run("index_add_d1", n, lambda: z.index_add(0, rows, src))
    run("index_add_d2", n, lambda: z.index_add(1, rows, src))
for n in (1000000, 10000000):
    v = torch.randn(n)
    run("cumsum", n, lambda: v.cumsum(0))
    run("sort", n, lambda: v.sort())
    run("topk100", n, lambda: v.topk(100))
