"""tests/bench/nn/loss2.py -- PyTorch's side of tests/bench/nn/loss2.lua
(Note [Bench families]): the same workloads, paired by name."""


def run(B):
    torch = B.torch
    F = torch.nn.functional
    ms = lambda t: t * 1e3  # noqa: E731
    default_threads = torch.get_num_threads()
    torch.manual_seed(0)
    p = (torch.rand(512, 1000) * 0.98 + 0.01).requires_grad_()
    z = torch.randn(512, 1000, requires_grad=True)
    y = torch.rand(512, 1000)
    B.threads(1)

    def bce():
        F.binary_cross_entropy(p, y).backward()
        p.grad = None

    def bcel():
        F.binary_cross_entropy_with_logits(z, y).backward()
        z.grad = None

    B.measure("bce_512x1000_fwd_bwd_t1", ms, "ms/iter", 20, bce)
    B.measure("bce_with_logits_512x1000_fwd_bwd_t1", ms, "ms/iter", 20, bcel)
    B.threads(default_threads)
