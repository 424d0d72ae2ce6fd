#!/usr/bin/env python3
"""PyTorch's gradients (and refusals) for the cases in tests/autograd/test_inplace_views.cpp.

The test writes its expected values by hand; this script shows PyTorch (1.13) agrees. Run:
  python3 tools/inplace_views_reference.py
Each line: case name, then x.grad (and other grads) as float64 lists, or the error PyTorch raises.
"""
import torch

torch.set_default_dtype(torch.float64)


def case(name):
    def wrap(fn):
        try:
            out = fn()
            print(f"{name}: " + "; ".join(str(t.tolist()) for t in out))
        except RuntimeError as e:
            print(f"{name}: RuntimeError: {str(e).splitlines()[0][:120]}")
        return fn
    return wrap


@case("base modified after view")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    v = y.select(0, 0)
    y.mul_(3)
    (v * v).backward()
    return [x.grad]


@case("view of view, base modified")
def _():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    w = y[0:2].select(0, 1)
    y.mul_(3)
    (w * w).backward()
    return [x.grad]


@case("base written under no_grad")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    v = y.select(0, 0)
    with torch.no_grad():
        y.mul_(3)
    (v * v).backward()
    return [x.grad]


@case("copy_ into a slice of a plain buffer")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    buf = torch.zeros(4)
    buf[0:2].copy_(x * 3)
    ((buf * buf).sum() + x.sum()).backward()
    return [x.grad]


@case("another view of the buffer, taken before the copy")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    buf = torch.zeros(4)
    w = buf[1:3]
    buf[0:2].copy_(x * 3)
    (w * w).sum().backward()
    return [x.grad]


@case("mul_ by a tensor on a view of a view")
def _():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = torch.tensor([5.0], requires_grad=True)
    y = x * 2
    y[0:2][1:2].mul_(s)
    (y * y).sum().backward()
    return [x.grad, s.grad]


@case("in-place on a row of a transposed matrix")
def _():
    x = torch.arange(6.0).reshape(2, 3).requires_grad_()
    y = x * 1
    y.t()[1].mul_(2)
    (y * y).sum().backward()
    return [x.grad]


@case("add_ into a column of a buffer, then a second write over it")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    buf = torch.zeros(2, 3)
    buf[:, 1].add_(x)
    buf[1].mul_(x[0] + 1)
    (buf * torch.arange(6.0).reshape(2, 3)).sum().backward()
    return [x.grad]


@case("view made under no_grad, modified with grad on")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with torch.no_grad():
        v = y[0:1]
    v.mul_(10)
    return []


@case("detach_ on a view")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    x[0:1].detach_()
    return []


@case("an in-place op reading another view of the same memory")
def _():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    v, w = y[0:2], y[0:2]
    v.add_(w)
    (w * torch.tensor([1.0, 10.0])).sum().backward()
    return [x.grad]


@case("an in-place op reading a stale view of the same memory")
def _():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    s = torch.tensor([3.0], requires_grad=True)
    y = x * 1
    v, w = y[0:2], y[0:2]
    v.mul_(s)
    v.add_(w)
    (w * torch.tensor([1.0, 10.0])).sum().backward()
    return [x.grad, s.grad]


@case("copy_ into an as_strided alias of a buffer")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    buf = torch.zeros(4)
    buf.as_strided((2,), (1,), 1).copy_(x * 3)
    ((buf * buf).sum() + x.sum()).backward()
    return [x.grad]


@case("copy_ into an int64 tensor")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    i = torch.zeros(2, dtype=torch.int64)
    i.copy_(x)
    assert not i.requires_grad
    (x * i.double()).sum().backward()
    return [x.grad]


@case("requires_grad_() on a stale view")
def _():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    buf = torch.zeros(4)
    w = buf[0:2]
    buf.copy_(x * 1)
    w.requires_grad_()
    assert not w.is_leaf
    (w * w).sum().backward()
    return [x.grad]


@case("retain_grad, then in-place (direct; view with rewritten base)")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.mul_(2)
    (y * y).sum().backward()
    x2 = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y2 = x2 * 1
    v = y2[1:3]
    v.retain_grad()
    y2.mul_(2)
    (v * v).sum().backward()
    return [y.grad, x.grad, v.grad, x2.grad]


@case("retain_grad on a base rewritten through a view (1.13 keeps the old node's gradient)")
def _():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x * 1
    y.retain_grad()
    y[0:2].mul_(3)
    (y * y).sum().backward()
    return [y.grad, x.grad]


@case("view made under no_grad, base modified with grad on, then used")
def _():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    with torch.no_grad():
        v = y[0:1]
    y.mul_(2)
    return [(v * v).sum()]
