"""tests/bench/nn/attention.py -- torch's side of tests/bench/nn/attention.lua
(Note [Bench families]): nn.MultiheadAttention self-attention forward +
backward, L=64, N=32, E=256, 8 heads, float32, 1 thread, need_weights=False."""


def run(B):
    torch = B.torch

    def ms(t):
        return t * 1e3

    B.threads(1)
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(256, 8)
    x = torch.randn(64, 32, 256, requires_grad=True)
    g = torch.randn(64, 32, 256)

    def step():
        o, _ = m(x, x, x, need_weights=False)
        o.backward(g)
    B.measure("mha_fb_t1", ms, "ms", 3, step)
