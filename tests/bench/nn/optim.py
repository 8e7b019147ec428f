"""Bench family "optim" (Note [Bench families]): the workloads of optim.lua
in torch 1.13 -- one optimizer step over a 784-512-512-10 MLP's parameters
(update only), ms/step, one thread. adam_mlp_step is foreach=False (the
per-tensor loop ember's update follows); adam_mlp_step_default is the
constructor's default; adam_mlp_step_foreach the multi-tensor path."""


def run(B):
    torch = B.torch
    B.threads(1)
    torch.manual_seed(0)
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    params = list(mlp.parameters())
    for p in params:
        p.grad = torch.randn(p.shape) * 0.01
    ms = lambda t: t * 1e3  # noqa: E731
    for name, kw in (("adam_mlp_step", dict(foreach=False)), ("adam_mlp_step_default", {}),
                     ("adam_mlp_step_foreach", dict(foreach=True))):
        opt = torch.optim.Adam(params, lr=1e-3, **kw)
        B.measure(name, ms, "ms/step", 5, opt.step)
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)
    B.measure("adamw_mlp_step", ms, "ms/step", 5, opt.step)
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9, foreach=False)
    B.measure("sgd_momentum_mlp_step", ms, "ms/step", 5, opt.step)
