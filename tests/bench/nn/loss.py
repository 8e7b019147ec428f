"""tests/bench/nn/loss.py -- PyTorch's side of tests/bench/nn/loss.lua (Note
[Bench families]): the same workloads, paired by name; the MLP step is
torch_ref.py's (nn.Sequential + optim.SGD, momentum 0.9, lr 0.01)."""


def run(B):
    torch = B.torch
    F = torch.nn.functional
    ms = lambda t: t * 1e3  # noqa: E731
    default_threads = torch.get_num_threads()
    torch.manual_seed(0)
    x = torch.randn(512, 1000, requires_grad=True)
    g = torch.randn(512, 1000)
    y = torch.randint(0, 1000, (512,))
    for th in (1, 2):
        B.threads(th)
        for name in ("softmax", "log_softmax"):
            fn = getattr(F, name)

            def step():
                fn(x, 1).backward(g)
                x.grad = None
            B.measure("%s_512x1000_fwd_bwd_t%d" % (name, th), ms, "ms/iter", 20, step)

        def ce():
            F.cross_entropy(x, y).backward()
            x.grad = None
        B.measure("cross_entropy_512x1000_fwd_bwd_t%d" % th, ms, "ms/iter", 20, ce)

    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xb, yb = torch.randn(128, 784), torch.randint(0, 10, (128,))

    def mlp_step():
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    for th in ("def", 1, 2):
        B.threads(default_threads if th == "def" else th)
        B.measure("mlp_b128_step_t%s" % th, ms, "ms/step", 20, mlp_step)
    B.threads(default_threads)
