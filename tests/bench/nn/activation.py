"""tests/bench/nn/activation.py -- PyTorch's side of the activation family's
workloads (tests/bench/nn/activation.lua; Note [Bench families])."""
import torch
import torch.nn.functional as F


def run(B):
    B.threads(1)
    x = torch.randn(1000000, requires_grad=True)
    g = torch.randn(1000000)

    def ms(t):
        return t * 1e3
    cases = [
        ('gelu', lambda a: F.gelu(a)),
        ('gelu_tanh', lambda a: F.gelu(a, approximate='tanh')),
        ('silu', lambda a: F.silu(a)),
        ('dropout', lambda a: F.dropout(a, 0.5)),
    ]
    for name, f in cases:
        def fwd(f=f):
            with torch.no_grad():
                f(x)

        def fwdbwd(f=f):
            x.grad = None
            f(x).backward(g)
        B.measure(name + '_fwd_1e6_t1', ms, 'ms', 5, fwd)
        B.measure(name + '_fwdbwd_1e6_t1', ms, 'ms', 5, fwdbwd)
