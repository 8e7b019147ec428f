"""embed.py -- PyTorch's side of embed.lua: embedding and embedding_bag
(sum) forward+backward over a 50000x128 float32 weight with 4096x32 ids,
measured as bench.lua measures."""


def run(B):
    torch = B.torch
    F = torch.nn.functional
    default = torch.get_num_threads()
    torch.manual_seed(0)
    w = torch.randn(50000, 128, requires_grad=True)
    ids = torch.randint(0, 50000, (4096, 32))
    g = torch.randn(4096, 32, 128)
    gb = torch.randn(4096, 128)
    for name, th in (("t1", 1), ("tdef", default)):
        B.threads(th)

        def emb():
            w.grad = None
            F.embedding(ids, w).backward(g)

        def bag():
            w.grad = None
            F.embedding_bag(ids, w, mode="sum").backward(gb)
        B.measure("embedding_50000x128_4096x32_fb_" + name, lambda t: t * 1e3, "ms", 5, emb)
        B.measure("embedding_bag_sum_50000x128_4096x32_fb_" + name, lambda t: t * 1e3, "ms", 5, bag)
    B.threads(default)
