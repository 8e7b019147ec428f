"""gen_nn_rnn_ref.py -- writes the PyTorch 1.13 reference values of
tests/lua/test_nn_rnn.lua (the block between its BEGIN/END reference
markers): outputs, final states and the gradients of the input, the initial
states and every parameter, for the cases listed in CASES.

    /usr/bin/python3 tests/lua/gen_nn_rnn_ref.py   # rewrites the block

Every tensor is filled deterministically, in float64, with
fill(shape, s) = 0.5 * sin(0.7 * k + s), k = 1..numel in row-major order;
the test fills ember's tensors the same way. Parameter number i (1-based, in
parameters() order) uses s = i; the input 0.3, h_0 0.6, c_0 0.9. The loss is
sum(output * fill(1.7)) + sum(h_n * fill(2.3)) (+ sum(c_n * fill(2.9))).
Masked cases run torch over pack_padded_sequence(enforce_sorted=False) and
pad_packed_sequence(total_length=L).
"""
import os
import re
import torch

torch.set_default_dtype(torch.float64)


def fill(shape, s):
    n = 1
    for d in shape:
        n *= d
    k = torch.arange(1, n + 1, dtype=torch.float64)
    return (0.5 * torch.sin(0.7 * k + s)).reshape(shape)


# name, class, input_size, hidden_size, options, input shape, hx?, lengths
CASES = [
    ("rnn_tanh_l2_bi_bf", "RNN", 3, 2, dict(num_layers=2, bidirectional=True, batch_first=True), (2, 4, 3), True, None),
    ("rnn_relu_l2_bi_bf", "RNN", 3, 2, dict(num_layers=2, bidirectional=True, batch_first=True, nonlinearity="relu"),
     (2, 4, 3), True, None),
    ("lstm_l2_bi_bf", "LSTM", 3, 2, dict(num_layers=2, bidirectional=True, batch_first=True), (2, 4, 3), True, None),
    ("gru_l2_bi_bf", "GRU", 3, 2, dict(num_layers=2, bidirectional=True, batch_first=True), (2, 4, 3), True, None),
    ("rnn_tanh_l1", "RNN", 3, 2, dict(), (4, 2, 3), False, None),
    ("lstm_l1_nobias", "LSTM", 3, 2, dict(bias=False), (4, 2, 3), False, None),
    ("gru_l1", "GRU", 3, 2, dict(), (4, 2, 3), False, None),
    ("lstm_proj_l2_bi", "LSTM", 3, 3, dict(num_layers=2, bidirectional=True, proj_size=2), (4, 2, 3), True, None),
    ("rnn_tanh_masked", "RNN", 3, 2, dict(num_layers=2, bidirectional=True), (4, 3, 3), True, [4, 1, 2]),
    ("lstm_masked_bf", "LSTM", 3, 2, dict(num_layers=2, bidirectional=True, batch_first=True), (3, 4, 3), True,
     [2, 4, 1]),
    ("gru_masked", "GRU", 3, 2, dict(num_layers=2, bidirectional=True), (4, 3, 3), True, [3, 4, 2]),
    ("gru_unbatched_l2", "GRU", 3, 2, dict(num_layers=2), (4, 3), True, None),
]

CELLS = [
    ("rnncell_relu", "RNNCell", 3, 2, dict(nonlinearity="relu"), (2, 3)),
    ("lstmcell", "LSTMCell", 3, 2, dict(), (2, 3)),
    ("grucell", "GRUCell", 3, 2, dict(), (2, 3)),
    ("grucell_unbatched", "GRUCell", 3, 2, dict(), (3,)),
]


def flat(t):
    return "{" + ", ".join("%.15g" % v for v in t.detach().reshape(-1).tolist()) + "}"


def emit(name, module, values, grads):
    lines = ["REF.%s = {" % name]
    for k, v in values:
        lines.append("  %s = %s," % (k, flat(v)))
    lines.append("  grads = {")
    for k, g in grads:
        lines.append("    %s = %s," % (k, flat(g)))
    lines.append("  },")
    lines.append("}")
    return "\n".join(lines)


def set_params(m):
    with torch.no_grad():
        for i, p in enumerate(m.parameters(), 1):
            p.copy_(fill(p.shape, i))


def run_case(name, cls, isz, hsz, opts, shape, with_hx, lengths):
    m = getattr(torch.nn, cls)(isz, hsz, **opts)
    set_params(m)
    x = fill(shape, 0.3).requires_grad_()
    D = 2 if opts.get("bidirectional") else 1
    nl = opts.get("num_layers", 1) * D
    hout = opts.get("proj_size", 0) or hsz
    unbatched = len(shape) == 2
    N = 1 if unbatched else (shape[0] if opts.get("batch_first") else shape[1])
    hshape = (nl, hout) if unbatched else (nl, N, hout)
    cshape = (nl, hsz) if unbatched else (nl, N, hsz)
    h0 = fill(hshape, 0.6).requires_grad_() if with_hx else None
    c0 = fill(cshape, 0.9).requires_grad_() if with_hx and cls == "LSTM" else None
    hx = (h0, c0) if cls == "LSTM" and with_hx else h0
    if lengths is not None:
        L = shape[1] if opts.get("batch_first") else shape[0]
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), batch_first=opts.get(
            "batch_first", False), enforce_sorted=False)
        out, st = m(packed, hx)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=opts.get("batch_first", False),
                                                        total_length=L)
    else:
        out, st = m(x, hx)
    h_n, c_n = (st if cls == "LSTM" else (st, None))
    loss = (out * fill(out.shape, 1.7)).sum() + (h_n * fill(h_n.shape, 2.3)).sum()
    if c_n is not None:
        loss = loss + (c_n * fill(c_n.shape, 2.9)).sum()
    loss.backward()
    values = [("output", out), ("h_n", h_n)] + ([("c_n", c_n)] if c_n is not None else [])
    grads = [("input", x.grad)]
    if h0 is not None:
        grads.append(("h_0", h0.grad))
    if c0 is not None:
        grads.append(("c_0", c0.grad))
    grads += [(k, p.grad) for k, p in m.named_parameters()]
    return emit(name, m, values, grads)


def run_cell(name, cls, isz, hsz, opts, shape):
    m = getattr(torch.nn, cls)(isz, hsz, **opts)
    set_params(m)
    x = fill(shape, 0.3).requires_grad_()
    hshape = (shape[0], hsz) if len(shape) == 2 else (hsz,)
    h0 = fill(hshape, 0.6).requires_grad_()
    if cls == "LSTMCell":
        c0 = fill(hshape, 0.9).requires_grad_()
        h, c = m(x, (h0, c0))
        loss = (h * fill(h.shape, 2.3)).sum() + (c * fill(c.shape, 2.9)).sum()
        values = [("h", h), ("c", c)]
    else:
        c0 = None
        h = m(x, h0)
        loss = (h * fill(h.shape, 2.3)).sum()
        values = [("h", h)]
    loss.backward()
    grads = [("input", x.grad), ("h_0", h0.grad)] + ([("c_0", c0.grad)] if c0 is not None else [])
    grads += [(k, p.grad) for k, p in m.named_parameters()]
    return emit(name, m, values, grads)


def main():
    assert torch.__version__.startswith("1.13"), torch.__version__
    blocks = [run_case(*c) for c in CASES] + [run_cell(*c) for c in CELLS]
    text = "\n".join(blocks)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_nn_rnn.lua")
    with open(path) as f:
        src = f.read()
    begin = "-- BEGIN reference (generated by tests/lua/gen_nn_rnn_ref.py, do not edit)\n"
    end = "-- END reference\n"
    i, j = src.index(begin) + len(begin), src.index(end)
    with open(path, "w") as f:
        f.write(src[:i] + text + "\n" + src[j:])


if __name__ == "__main__":
    main()
