"""zz_cnn.py -- PyTorch's side of zz_cnn.lua: torch_ref.py's cnn() step
(nn.Sequential + optim.SGD lr 0.01), measured as bench.lua measures."""


def run(B):
    torch = B.torch
    nn = torch.nn
    default = torch.get_num_threads()
    for name, th in (("tdef", default), ("t1", 1), ("t2", 2)):
        B.threads(th)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

        def step():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        B.measure("cnn_b64_step_" + name, lambda t: t * 1e3, "ms", 10, step)
    B.threads(default)
