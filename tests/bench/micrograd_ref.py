#!/usr/bin/python3
"""Pure-Python scalar autodiff in the style of Karpathy's micrograd, timed.

A copy of ../shared/bench/micrograd_ref.py (the reference figures' script),
kept here so that make bench runs it in a fresh clone (run_bench.sh prints
its chain beside ember's and PyTorch's). The Value class follows Andrej
Karpathy's micrograd (https://github.com/karpathy/micrograd, MIT licence,
Copyright (c) 2020 Andrej Karpathy); the backward pass is made iterative.

Usage: /usr/bin/python3 tests/bench/micrograd_ref.py
Output: `name median unit best=X n=R` (us per op node; leaves not counted).
"""
import gc, math, statistics, time


class Value:
    def __init__(self, data, _children=(), _op=""):
        self.data, self.grad = data, 0.0
        self._backward = lambda: None
        self._prev, self._op = set(_children), _op

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")
        def _backward():
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")
        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    def __pow__(self, k):
        assert isinstance(k, (int, float))
        out = Value(self.data ** k, (self,), f"**{k}")
        def _backward():
            self.grad += k * self.data ** (k - 1) * out.grad
        out._backward = _backward
        return out

    def relu(self):
        out = Value(self.data if self.data > 0 else 0.0, (self,), "relu")
        def _backward():
            self.grad += (out.data > 0) * out.grad
        out._backward = _backward
        return out

    def tanh(self):
        t = math.tanh(self.data)
        out = Value(t, (self,), "tanh")
        def _backward():
            self.grad += (1 - t * t) * out.grad
        out._backward = _backward
        return out

    def backward(self):
        # topological order; iterative DFS (the recursive original overflows
        # Python's recursion limit on a 10k-deep chain)
        topo, visited, stack = [], set(), [(self, False)]
        while stack:
            v, done = stack.pop()
            if done:
                topo.append(v)
            elif v not in visited:
                visited.add(v)
                stack.append((v, True))
                stack.extend((c, False) for c in v._prev)
        self.grad = 1.0
        for v in reversed(topo):
            v._backward()

    __radd__ = __add__
    __rmul__ = __mul__
    def __neg__(self): return self * -1
    def __sub__(self, other): return self + (-other)
    def __rsub__(self, other): return other + (-self)
    def __truediv__(self, other): return self * other ** -1
    def __rtruediv__(self, other): return other * self ** -1
    def __repr__(self): return f"Value(data={self.data}, grad={self.grad})"


def chain(x, n=10_000):
    """Same graph as torch_ref.py chain: alternating *0.999, +0.001, tanh."""
    y = x
    for i in range(n):
        r = i % 3
        y = y * 0.999 if r == 0 else (y + 0.001 if r == 1 else y.tanh())
    return y


def dot(ws, xs):
    """Fan-in graph: tanh(sum_i w_i * x_i), 2n+1 op nodes over 2n leaves."""
    y = ws[0] * xs[0]
    for w, x in zip(ws[1:], xs[1:]):
        y = y + w * x
    return y.tanh()


def check():
    a, b = Value(2.0), Value(-3.0)
    c = (a * b + a ** 3).relu() + (a / b).tanh() - b
    c.backward()
    th = math.tanh(2 / -3)
    assert abs(a.grad - (-3 + 12 + (1 - th * th) / -3)) < 1e-12
    assert abs(b.grad - (2 + (1 - th * th) * -2 / 9 - 1)) < 1e-12


def bench(name, setup, build, nodes, reps=7):
    """Times build(*setup()) (forward) and .backward(); leaves made untimed."""
    fw, bw = [], []
    for r in range(reps + 1):  # r = 0: warm-up
        args = setup()
        gc.collect()
        t0 = time.perf_counter(); y = build(*args); t1 = time.perf_counter()
        y.backward(); t2 = time.perf_counter()
        del args, y  # let gc.collect() free this graph before the next rep
        if r:
            fw.append(t1 - t0); bw.append(t2 - t1)
    us = lambda t: t / nodes * 1e6
    for part, ts in (("forward", fw), ("backward", bw), ("total", [f + b for f, b in zip(fw, bw)])):
        print(f"micrograd_{name}_{part} {us(statistics.median(ts)):.3f} us/node "
              f"best={us(min(ts)):.3f} n={reps}", flush=True)


if __name__ == "__main__":
    check()
    bench("chain10k", lambda: (Value(0.5),), chain, 10_000, reps=21)  # as bench.lua's chain
    n = 5_000
    bench("dot10k", lambda: ([Value(0.01 * i) for i in range(n)], [Value(1.0) for _ in range(n)]), dot, 2 * n)
