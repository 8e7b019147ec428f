"""rnn.py -- PyTorch's side of rnn.lua: a 2-layer nn.LSTM / nn.GRU, hidden 256,
input 256, batch 32, 50 steps, forward + backward of the output's sum (and
forward alone under no_grad), one thread."""


def run(B):
    torch = B.torch
    default = torch.get_num_threads()
    B.threads(1)
    torch.manual_seed(0)
    x = torch.randn(50, 32, 256)
    for cls in ("LSTM", "GRU"):
        m = getattr(torch.nn, cls)(256, 256, num_layers=2)

        def step():
            m.zero_grad()
            y, _ = m(x)
            y.sum().backward()
        B.measure(cls.lower() + "_l2_h256_b32_s50_fwdbwd_t1", lambda t: t * 1e3, "ms", 2, step)

        def fwd():
            with torch.no_grad():
                m(x)
        B.measure(cls.lower() + "_l2_h256_b32_s50_fwd_t1", lambda t: t * 1e3, "ms", 2, fwd)
    B.threads(default)
