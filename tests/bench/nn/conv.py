"""tests/bench/nn/conv.py -- the conv family's workloads for PyTorch 1.13
(Note [Bench families]), the same as conv.lua: conv2d forward + backward
(input and weight gradients), float32, 2 threads and 1; ms per step."""
import torch
import torch.nn.functional as F


def run(B):
    cases = [
        ("conv2d_64x3x32x32_16_fb", (64, 3, 32, 32), (16, 3, 3, 3)),
        ("conv2d_64x16x16x16_32_fb", (64, 16, 16, 16), (32, 16, 3, 3)),
    ]
    for th in (2, 1):
        B.threads(th)
        for name, xs, ws in cases:
            torch.manual_seed(0)
            x = torch.randn(xs, requires_grad=True)
            w = torch.randn(ws, requires_grad=True)
            go = torch.ones(F.conv2d(x, w, None, 1, 1).shape)

            def step():
                y = F.conv2d(x, w, None, 1, 1)
                y.backward(go)
                x.grad, w.grad = None, None
            B.measure(name + "_t%d" % th, lambda t: t * 1e3, "ms", 5, step)
    B.threads(2)
