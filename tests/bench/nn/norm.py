"""tests/bench/nn/norm.py -- torch's side of tests/bench/nn/norm.lua (Note
[Bench families]): the same workloads, float32 forward + backward."""


def run(B):
    torch = B.torch
    F = torch.nn.functional

    def ms(t):
        return t * 1e3

    for th in (1, 2):
        B.threads(th)
        torch.manual_seed(0)
        x = torch.randn(4096, 1024, requires_grad=True)
        w = torch.randn(1024, requires_grad=True)
        b = torch.randn(1024, requires_grad=True)
        g = torch.randn(4096, 1024)
        B.measure("layer_norm_fb_t%d" % th, ms, "ms", 3,
                  lambda: F.layer_norm(x, (1024,), w, b).backward(g))
        x = torch.randn(64, 32, 32, 32, requires_grad=True)
        w = torch.randn(32, requires_grad=True)
        b = torch.randn(32, requires_grad=True)
        rm, rv = torch.zeros(32), torch.ones(32)
        g = torch.randn(64, 32, 32, 32)
        B.measure("batch_norm_fb_t%d" % th, ms, "ms", 3,
                  lambda: F.batch_norm(x, rm, rv, w, b, True).backward(g))
        B.measure("group_norm_fb_t%d" % th, ms, "ms", 3,
                  lambda: F.group_norm(x, 32, w, b).backward(g))
