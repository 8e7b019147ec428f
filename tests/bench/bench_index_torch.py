"""bench_index_torch.py -- PyTorch 1.13 side of tests/bench/bench_index.lua (same workloads,
same lines; indices 0-based here). /usr/bin/python3 tests/bench/bench_index_torch.py [threads]"""
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
torch.manual_seed(0)
def med(f, reps):
    ts = []
    for _ in range(reps):
        t0 = time.process_time(); f(); ts.append(time.process_time() - t0)
    ts.sort(); return ts[len(ts) // 2]
for N in (1000, 3162):
    x = torch.randn(N, N); idx = (torch.rand(N, N) * N).long(); src = torch.randn(N, N)
    rows = (torch.rand(N) * N).long(); z = torch.zeros(N, N); n = N * N
    print("gather_d2 n=%d %.3f ms" % (n, 1e3 * med(lambda: x.gather(1, idx), 7)))
    print("gather_d1 n=%d %.3f ms" % (n, 1e3 * med(lambda: x.gather(0, idx), 7)))
    print("scatter_add_d2 n=%d %.3f ms" % (n, 1e3 * med(lambda: z.scatter_add(1, idx, src), 7)))
    print("scatter_add_d1 n=%d %.3f ms" % (n, 1e3 * med(lambda: z.scatter_add(0, idx, src), 7)))
    print("index_select_d1 n=%d %.3f ms" % (n, 1e3 * med(lambda: x.index_select(0, rows), 7)))
    print("index_select_d2 n=%d %.3f ms" % (n, 1e3 * med(lambda: x.index_select(1, rows), 7)))
    print("index_add_d1 n=%d %.3f ms" % (n, 1e3 * med(lambda: z.index_add(0, rows, src), 7)))
    print("index_add_d2 n=%d %.3f ms" % (n, 1e3 * med(lambda: z.index_add(1, rows, src), 7)))
