"""tests/bench/nn/vmath.py -- PyTorch's side of tests/bench/nn/vmath.lua
(Note [Bench families]): the 1e7 float32 add and transcendental lines of
torch_bench.py, run only when BENCH_ONLY=vmath (the full bench has them)."""
import os


def run(B):
    if os.environ.get("BENCH_ONLY") != "vmath":
        return
    torch = B.torch
    default_threads = torch.get_num_threads()
    n = 10_000_000
    a, b = torch.randn(n), torch.randn(n)
    u = torch.rand(n) * 4 - 2
    p = torch.rand(n) + 0.1
    for th in (1, 2):
        B.threads(th)
        B.measure("add_1e7_f32_t%d" % th, lambda t: 12 * n / t / 1e9, "GB/s", 10, lambda: a + b)
        for name, x in (("exp", u), ("log", p), ("tanh", u), ("sigmoid", u), ("sin", u)):
            f = getattr(torch, name)
            B.measure("%s_1e7_f32_t%d" % (name, th), lambda t: 8 * n / t / 1e9, "GB/s", 5, lambda f=f, x=x: f(x))
    B.threads(default_threads)
