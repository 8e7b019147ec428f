"""tests/bench/nn/step.py -- PyTorch's side of tests/bench/nn/step.lua (Note
[Bench families]): addcdiv_ / addcmul_ in place and div on 1M float32, one
thread."""


def run(B):
    torch = B.torch
    default_threads = torch.get_num_threads()
    B.threads(1)
    torch.manual_seed(0)
    n = 1000000
    p, a, b = torch.randn(n), torch.randn(n), torch.rand(n) + 1
    ms = lambda t: t * 1e3  # noqa: E731
    B.measure("addcdiv_inplace_1e6_t1", ms, "ms/iter", 20, lambda: p.addcdiv_(a, b, value=-1e-3))
    B.measure("addcmul_inplace_1e6_t1", ms, "ms/iter", 20, lambda: p.addcmul_(a, b, value=1e-3))
    B.measure("div_1e6_t1", ms, "ms/iter", 20, lambda: p / b)
    B.threads(default_threads)
