"""tests/bench/nn/metric.py -- the metric family's workloads for PyTorch
(Note [Bench families]); the same as metric.lua. Times in ms per call."""


def run(B):
    torch = B.torch
    B.threads(2)
    F = torch.nn.functional

    def ms(t):
        return t * 1e3
    torch.manual_seed(0)
    a = torch.randn(1000, 64, requires_grad=True)
    b = torch.randn(1000, 64, requires_grad=True)
    B.measure("cdist_1000x64_p2_fwd", ms, "ms/call", 5, lambda: torch.cdist(a.detach(), b.detach()))

    def fb(p):
        def f():
            a.grad, b.grad = None, None
            torch.cdist(a, b, p).sum().backward()
        return f
    B.measure("cdist_1000x64_p2_fwdbwd", ms, "ms/call", 3, fb(2.0))
    B.measure("cdist_1000x64_p1_fwdbwd", ms, "ms/call", 1, fb(1.0))
