"""pool.py -- PyTorch's side of pool.lua: max_pool2d 2x2 forward+backward on
64x32x32x32 float32, measured as bench.lua measures."""


def run(B):
    torch = B.torch
    F = torch.nn.functional
    default = torch.get_num_threads()
    torch.manual_seed(0)
    x = torch.randn(64, 32, 32, 32, requires_grad=True)
    g = torch.randn(64, 32, 16, 16)
    for name, th in (("tdef", default), ("t1", 1)):
        B.threads(th)

        def step():
            x.grad = None
            F.max_pool2d(x, 2).backward(g)
        B.measure("max_pool2d_64x32x32x32_fb_" + name, lambda t: t * 1e3, "ms", 10, step)
    B.threads(default)
