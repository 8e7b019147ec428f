"""spatial.py -- the spatial family's workloads beside tests/bench/nn/spatial.lua
(Note [Bench families]): interpolate bilinear 64x16x32x32 -> 64x64 and F.pad
reflect by 2, and scaled_dot_product_attention (B=32 H=8 L=128 D=64; torch 1.13
has no F.scaled_dot_product_attention: PyTorch 2.1's math written out),
forward+backward, ms per step."""


def run(B):
    torch = B.torch
    F = torch.nn.functional
    B.threads(2)

    def ms(t):
        return t * 1e3

    x = torch.randn(64, 16, 32, 32, requires_grad=True)

    def interp():
        y = F.interpolate(x, size=(64, 64), mode='bilinear')
        y.sum().backward()
        x.grad = None
    B.measure("interp_bilinear_fb", ms, "ms/step", 3, interp)

    def pad():
        y = F.pad(x, (2, 2, 2, 2), mode='reflect')
        y.sum().backward()
        x.grad = None
    B.measure("pad_reflect_fb", ms, "ms/step", 5, pad)

    q, k, v = (torch.randn(32, 8, 128, 64, requires_grad=True) for _ in range(3))

    def sdpa():
        w = torch.softmax(q @ k.transpose(-2, -1) * (1 / 8.0), -1)
        (w @ v).sum().backward()
        q.grad = k.grad = v.grad = None
    B.measure("sdpa_fb", ms, "ms/step", 2, sdpa)
