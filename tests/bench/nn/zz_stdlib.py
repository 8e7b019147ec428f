"""zz_stdlib.py -- PyTorch's side of zz_stdlib.lua: the MLP step with
nn.Sequential + CrossEntropyLoss + optim.SGD / optim.Adam, the CNN step with
nn modules + SGD, and the peak resident memory of a process that trains the
MLP for 50 steps (ru_maxrss of a child python)."""
import subprocess
import sys

MLP_SRC = """
import torch
nn = torch.nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.%s(model.parameters(), lr=%g)
x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
def step():
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
"""


def run(B):
    torch = B.torch
    nn = torch.nn
    default = torch.get_num_threads()
    for short, name, lr in (("sgd", "SGD", 0.01), ("adam", "Adam", 1e-3)):
        ns = {}
        exec(MLP_SRC % (name, lr), ns)
        for tn, th in (("t1", 1), ("tdef", default)):
            B.threads(th)
            B.measure("nn_mlp_%s_step_%s" % (short, tn), lambda t: t * 1e3, "ms", 10, ns["step"])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

    def cnn_step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    for tn, th in (("t1", 1), ("tdef", default)):
        B.threads(th)
        B.measure("nn_cnn_sgd_step_" + tn, lambda t: t * 1e3, "ms", 10, cnn_step)
    B.threads(default)
    src = MLP_SRC % ("SGD", 0.01) + (
        "for _ in range(50):\n    step()\n"
        "import resource\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n")
    out = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True).stdout
    try:
        mib = float(out.split()[-1])
    except (IndexError, ValueError):
        return
    print("%-28s %10.2f %s best=%.2f n=%d" % ("torch_nn_mlp_train_peak_rss", mib, "MiB", mib, 1), flush=True)
