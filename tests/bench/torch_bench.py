#!/usr/bin/python3
"""torch_bench.py -- PyTorch 1.13's side of make bench: the workloads of
bench.lua, measured the same way (REPS repetitions of `inner` calls, median
and best), printed as `torch_NAME median unit best=X n=R` where ember prints
`ember_NAME`. run_bench.sh pairs the two by NAME and prints each ratio from
the same run. A workload named here but not in bench.lua (or the reverse)
just gets no ratio.

Usage: /usr/bin/python3 tests/bench/torch_bench.py
Threads: torch.set_num_threads and OpenBLAS's thread count per `_tN` suffix,
as bench.lua's ember.set_num_threads.
"""
import ctypes
import statistics
import time

import torch

REPS = 7
now = time.perf_counter

try:
    _ob = ctypes.CDLL("libopenblas.so.0")  # the instance torch's libblas.so.3 uses
    _ob_set = _ob.openblas_set_num_threads
except OSError:
    _ob_set = lambda n: None  # noqa: E731


_DEFAULT_THREADS = torch.get_num_threads()


def threads(n):
    torch.set_num_threads(n)
    _ob_set(n)


def measure(name, work, unit, inner, fn):
    """Prints `torch_NAME median unit best=.. n=REPS`; work maps the time of
    one call (seconds) to the reported figure."""
    fn()  # warm up
    ts = []
    for _ in range(REPS):
        t0 = now()
        for _ in range(inner):
            fn()
        ts.append((now() - t0) / inner)
    ts.sort()
    med, best = work(statistics.median(ts)), work(ts[0])
    print("%-28s %10.2f %s best=%.2f n=%d" % ("torch_" + name, med, unit, best, REPS), flush=True)


def ns_per(n):
    return lambda t: t / n * 1e9


def gbs(nbytes):
    return lambda t: nbytes / t / 1e9


def one_element():
    threads(1)
    a, b = torch.ones(1), torch.ones(1)
    n = 200000

    def loop():
        for _ in range(n):
            c = a + b  # noqa: F841
    measure("add_1elem", ns_per(n), "ns/op", 1, loop)
    a = torch.ones(1, requires_grad=True)
    measure("add_1elem_grad", ns_per(n), "ns/op", 1, loop)


def elementwise():
    n = 10_000_000
    a, b = torch.randn(n), torch.randn(n)
    m = a.view(1000, 10000)
    for th in (1, 2):
        threads(th)
        measure("add_1e7_f32_t%d" % th, gbs(12 * n), "GB/s", 10, lambda: a + b)
        measure("sum_1e7_f32_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: a.sum())
        measure("sum_1e3x1e4_dim2_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: m.sum(1))
        measure("sum_1e3x1e4_dim1_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: m.sum(0))
        measure("prod_1e7_f32_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: a.prod())
        measure("amax_1e7_f32_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: a.amax())
        measure("amax_1e3x1e4_dim1_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: m.amax(0))
        measure("var_1e7_f32_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: a.var())
        measure("var_1e3x1e4_dim2_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: m.var(1))
        measure("norm_1e7_f32_t%d" % th, gbs(4 * n), "GB/s", 10, lambda: a.norm())


def pointwise():
    """Transcendental functions on 1e7 float32, out of place (GB/s counted
    as 8 bytes per element: one read, one write)."""
    n = 10_000_000
    a = torch.rand(n) * 4 - 2
    p = torch.rand(n) + 0.1
    for th in (1, 2):
        threads(th)
        for name, x in (("exp", a), ("log", p), ("tanh", a), ("sigmoid", a), ("sin", a)):
            f = getattr(torch, name)
            measure("%s_1e7_f32_t%d" % (name, th), gbs(8 * n), "GB/s", 5, lambda: f(x))


def indexing():
    """gather/scatter_add/index_select/index_add, cumsum, sort, topk (t1;
    Melem/s of the result or of the input)."""
    threads(1)
    g = torch.Generator().manual_seed(0)
    n = 1_000_000
    mel = lambda k: (lambda t: k / t / 1e6)  # noqa: E731
    for tag, rows_n, inner in (("1e6", 1000, 5), ("1e7", 10000, 3)):  # rows x 1000 float32
        N = rows_n * 1000
        x, src = torch.randn(rows_n, 1000), torch.randn(rows_n, 1000)
        idx = torch.randint(0, 1000, (rows_n, 1000), generator=g)
        rows = torch.randint(0, rows_n, (rows_n,), generator=g)
        measure("gather_%s_dim2_t1" % tag, mel(N), "Melem/s", inner, lambda: x.gather(1, idx))
        measure("scatter_add_%s_dim2_t1" % tag, mel(N), "Melem/s", inner,
                lambda: torch.zeros(rows_n, 1000).scatter_add_(1, idx, src))
        measure("index_select_%s_dim1_t1" % tag, mel(N), "Melem/s", inner, lambda: x.index_select(0, rows))
        measure("index_add_%s_dim1_t1" % tag, mel(N), "Melem/s", inner,
                lambda: torch.zeros(rows_n, 1000).index_add_(0, rows, src))
    v = torch.randn(10_000_000)
    measure("cumsum_1e7_f32_t1", mel(10_000_000), "Melem/s", 3, lambda: v.cumsum(0))
    measure("sort_1e6_f32_t1", mel(n), "Melem/s", 3, lambda: v[:n].sort())
    measure("topk100_1e6_f32_t1", mel(n), "Melem/s", 3, lambda: v[:n].topk(100))


def matmul():
    n = 1024
    a, b = torch.randn(n, n), torch.randn(n, n)
    for th in (1, 2):
        threads(th)
        measure("matmul_f32_n1024_t%d" % th, lambda t: 2 * n ** 3 / t / 1e9, "GFLOP/s", 5,
                lambda: a.matmul(b))


def chain():
    threads(1)
    N = 10000
    fw, bw = [], []

    def run():
        x = torch.full((1,), 0.5, requires_grad=True)
        t0 = now()
        y = x
        for i in range(N):
            r = i % 3
            y = y * 0.999 if r == 0 else y + 0.001 if r == 1 else y.tanh()
        t1 = now()
        y.backward(torch.ones(1))
        return t1 - t0, now() - t1
    run()
    reps = 21  # as bench.lua's chain: a run is short, so more of them
    for _ in range(reps):
        f, b = run()
        fw.append(f)
        bw.append(b)
    for name, ts in (("forward", fw), ("backward", bw),
                     ("total", [f + b for f, b in zip(fw, bw)])):
        ts = sorted(ts)
        print("%-28s %10.3f %s best=%.3f n=%d" % ("torch_chain10k_" + name,
              statistics.median(ts) / N * 1e6, "us/node", ts[0] / N * 1e6, reps), flush=True)


def chain1m():
    """bench.lua's 1M-node chain: forward and backward per node (an untimed run, then 3)."""
    threads(1)
    N = 1000000
    fw, bw = [], []
    for run in range(4):
        x = torch.full((1,), 0.5, requires_grad=True)
        t0 = now()
        y = x
        for i in range(N):
            r = i % 3
            y = y * 0.999 if r == 0 else y + 0.001 if r == 1 else y.tanh()
        t1 = now()
        y.backward(torch.ones(1))
        if run:
            fw.append(t1 - t0)
            bw.append(now() - t1)
        del x, y
    for name, ts in (("forward", fw), ("backward", bw)):
        ts = sorted(ts)
        print("%-28s %10.3f %s best=%.3f n=%d" % ("torch_chain1m_" + name, ts[1] / N * 1e6, "us/node",
              ts[0] / N * 1e6, 3), flush=True)


NODE_BYTES_SRC = """
import gc, torch
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS"))
N = 1000000
x = torch.full((1,), 0.5, requires_grad=True)
w = (x * 0.999 + 0.001).tanh(); del w
gc.collect()
m0 = rss()
y = x
for i in range(N):
    r = i % 3
    y = y * 0.999 if r == 0 else y + 0.001 if r == 1 else y.tanh()
gc.collect()
print((rss() - m0) * 1024 / N)
"""


def node_bytes():
    """bench.lua's bytes per recorded node: a fresh process's VmRSS growth
    over a 1M-node chain, per node."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", NODE_BYTES_SRC], capture_output=True, text=True).stdout
    try:
        b = float(out.split()[-1])
    except (IndexError, ValueError):
        return
    print("%-28s %10.2f %s best=%.2f n=%d" % ("torch_chain1m_bytes_per_node", b, "B/node", b, 1), flush=True)


def startup():
    """`python3 -c 'import torch'`, median of 5 runs (ember_startup is
    `ember -e ''`)."""
    import subprocess
    import sys
    ts = []
    for _ in range(6):
        t0 = now()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        ts.append((now() - t0) * 1e3)
    ts = sorted(ts[1:])
    print("%-28s %10.2f %s best=%.2f n=%d" % ("torch_startup", ts[2], "ms", ts[0], 5), flush=True)


def families():
    """Note [Bench families] (bench.lua): tests/bench/nn/FAMILY.py defines
    run(B) with B.torch, B.measure, B.threads, B.now, B.REPS, B.ns_per, B.gbs;
    BENCH_ONLY=FAMILY runs one."""
    import glob
    import importlib.util
    import os
    import types
    only = os.environ.get("BENCH_ONLY")
    B = types.SimpleNamespace(torch=torch, measure=measure, threads=threads, now=now,
                              REPS=REPS, ns_per=ns_per, gbs=gbs)
    here = os.path.dirname(os.path.abspath(__file__))
    for f in sorted(glob.glob(os.path.join(here, "nn", "*.py"))):
        fam = os.path.basename(f)[:-3]
        if only and only != fam:
            continue
        threads(_DEFAULT_THREADS)  # each family starts at the default (its "tdef" lines)
        spec = importlib.util.spec_from_file_location("bench_nn_" + fam, f)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
            mod.run(B)
        except Exception as e:  # one family's failure leaves the others' figures
            print("bench family %s failed: %s" % (fam, e), flush=True)


if __name__ == "__main__":
    import os
    if not os.environ.get("BENCH_ONLY"):
        one_element()
        elementwise()
        pointwise()
        indexing()
        matmul()
        chain()
        chain1m()
        node_bytes()
        startup()
    families()
