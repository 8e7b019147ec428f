"""grid.py -- the grid family's workloads beside tests/bench/nn/grid.lua
(Note [Bench families]): grid_sample bilinear 8x16x64x64 at an 8x64x64x2
grid, forward+backward, the same for a 5-d 4x8x16x32x32 input at a
4x16x32x32x3 grid, and interpolate bilinear antialias=True
8x3x256x256 -> 64x64 forward; 1 thread; ms per step."""


def run(B):
    torch = B.torch
    F = torch.nn.functional

    def ms(t):
        return t * 1e3

    B.threads(1)
    torch.manual_seed(0)
    x = torch.randn(8, 16, 64, 64, requires_grad=True)
    g = (torch.rand(8, 64, 64, 2) * 2.2 - 1.1).requires_grad_()

    def gs():
        F.grid_sample(x, g, align_corners=False).sum().backward()
        x.grad = g.grad = None
    B.measure("grid_sample_bilinear_fb_t1", ms, "ms/step", 3, gs)

    torch.manual_seed(0)
    x3 = torch.randn(4, 8, 16, 32, 32, requires_grad=True)
    g3 = (torch.rand(4, 16, 32, 32, 3) * 2.2 - 1.1).requires_grad_()

    def gs3():
        F.grid_sample(x3, g3, align_corners=False).sum().backward()
        x3.grad = g3.grad = None
    B.measure("grid_sample_3d_fb_t1", ms, "ms/step", 3, gs3)

    xa = torch.randn(8, 3, 256, 256)

    def aa():
        F.interpolate(xa, size=(64, 64), mode='bilinear', antialias=True)
    B.measure("interp_aa_down_f_t1", ms, "ms/step", 5, aa)
    B.threads(2)
