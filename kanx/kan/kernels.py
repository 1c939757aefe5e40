"""The fast kernels of a KAN layer: the fused layer y = [silu(x), B(x)] @ w as two autograd
Functions, eager or compiled by torch.compile, on the local (de Boor) basis of kanx.kan.basis.

Shapes as in kanx.kan.spline (M members, B batch, I inputs, O outputs, C = G + K
coefficients, T = G + 2K + 1 knots). kanx.kan.spline holds the reference maths: the dense
Cox-de Boor recursion (``spline._cox_de_boor``) that tests/test_kan.py checks every kernel
here against, and the grids and least-squares fits of the grid update. Only the K+1 basis
functions that are nonzero at an input are ever evaluated here (``basis.local_planes``); the
layer's input gradient comes from their K+1 closed-form derivatives.
"""

from __future__ import annotations

import torch

from kanx.compiling import static
from kanx.kan.basis import local_planes, scatter_columns


def _planes(x: torch.Tensor, grid: torch.Tensor, K: int, with_derivative: bool):
    """The local basis as stacked planes: j, N (K+1, M, I, B), silu and, if asked, dN and silu'."""
    j, N, dN, silu, dsilu = local_planes(x, grid, K, with_derivative)
    return j, torch.stack(N), silu, (torch.stack(dN) if with_derivative else None), dsilu


def _basis_planes(j: torch.Tensor, N, C: int, K: int) -> list[torch.Tensor]:
    """The C planes B_0(x), ..., B_{C-1}(x) (M, I, B each) from the local values N = [N_0, ..., N_K]
    (or anything indexed alike): B_c(x) = N_{c-j+K} where 0 <= c-j+K <= K, else 0 (K+1 selects
    per feature). Unstacked, so a compiled caller can reduce each plane where it is made."""
    zero = torch.zeros((), dtype=N[0].dtype, device=N[0].device)
    planes = []
    for c in range(C):  # B_c(x) is N_r where j = c+K-r
        v = torch.where(j == c + K, N[0], zero)
        for r in range(1, K + 1):
            v = torch.where(j == c + K - r, N[r], v)
        planes.append(v)
    return planes


def _dense(j: torch.Tensor, N: torch.Tensor, silu: torch.Tensor, C: int, K: int) -> torch.Tensor:
    """Features feats[m, f, i, b] = [silu(x), B_0(x), ..., B_{C-1}(x)] (M, 1+C, I, B) from the local
    basis (``_basis_planes``).

    Built as 1+C planes of (M, I, B) stacked at once: compiled, every plane is written from the
    same loop over (M, I, B) that computes the local basis, which is never stored."""
    return torch.stack([silu, *_basis_planes(j, N, C, K)], dim=1)


def _dense_scatter(j: torch.Tensor, N: torch.Tensor, silu: torch.Tensor, C: int, K: int) -> torch.Tensor:
    """``_dense`` by one scatter (eager)."""
    return torch.cat([silu.unsqueeze(1), scatter_columns(j, N.transpose(0, 1), C, K, dim=1)], dim=1)


def _selected(h: torch.Tensor, j: torch.Tensor, K: int, r: int) -> torch.Tensor:
    """h[m, 1 + j-K+r, i, b] (M, I, B), the entry of feature B_{j-K+r}, or 0 where j-K+r is no
    basis index, for h (M, 1+C, I, B) (expanded views welcome): one gather (eager)."""
    C = h.shape[1] - 1
    c = j + (r - K)
    hr = torch.gather(h, 1, (1 + c.clamp(0, C - 1)).long().unsqueeze(1)).squeeze(1)
    return torch.where((c >= 0) & (c < C), hr, torch.zeros((), dtype=hr.dtype, device=hr.device))


def _picked(h: torch.Tensor, j: torch.Tensor, K: int, r: int) -> torch.Tensor:
    """``_selected`` by C pointwise selects, for the compiled kernels (no indirect load; see
    ``basis._knots_windowed``); h (M, 1+C, I, B) or (M, 1+C, I, 1), broadcast along the batch."""
    v = torch.zeros((), dtype=h.dtype, device=h.device)
    for c in range(h.shape[1] - 1):
        v = torch.where(j == c + K - r, h[:, 1 + c], v)
    return v


def _grad_x(h: torch.Tensor, g: torch.Tensor | None, j: torch.Tensor, dN: torch.Tensor, dsilu: torch.Tensor, K: int,
            pointwise: bool = False) -> torch.Tensor:
    """d loss / d x[m,i,b] (M, I, B) = silu'(x) H[m,0,i,b] + sum_r dN_r H[m,1+j-K+r,i,b] for the
    layer y = feats @ w, with H[m,f,i,b] = sum_o w[m,f,i,o] grad_out[m,b,o] the gradient of the
    features: only the K+2 nonzero features of each input have a derivative, so H is read there only
    (``_selected``, or ``_picked`` with ``pointwise``).

    h (M, 1+C, I, B) is H itself, or, with one output (g = grad_out[..., 0] (M, B)), w[..., 0]
    (M, 1+C, I, 1) and H = h g.
    """
    pick = _picked if pointwise else _selected
    M, I, B = j.shape
    h = h.expand(M, h.shape[1], I, B)
    out = dsilu * h[:, 0]
    for r in range(K + 1):
        out = out + dN[r] * pick(h, j, K, r)
    return out if g is None else out * g.unsqueeze(1)


def _forward(x: torch.Tensor, grid: torch.Tensor, K: int, with_derivative: bool):
    """Local basis and dense features (M, 1+C, I, B) of a layer for x (M, I, B):
    (feats, j, dN (K+1, M, I, B), silu')."""
    j, N, dN, silu, dsilu = local_planes(x, grid, K, with_derivative, pointwise=True)
    return _dense(j, N, silu, grid.shape[-1] - K - 1, K), j, (torch.stack(dN) if with_derivative else None), dsilu


def _grad_x_pointwise(h: torch.Tensor, j: torch.Tensor, dN: torch.Tensor, dsilu: torch.Tensor, K: int) -> torch.Tensor:
    return _grad_x(h, None, j, dN, dsilu, K, pointwise=True)


def _forward_one(x: torch.Tensor, grid: torch.Tensor, w: torch.Tensor, K: int, with_derivative: bool):
    """A layer with one output, from the local basis alone (compiled): for x (M, I, B) and
    w (M, 1+C, I, 1) -> (y (M, B), j, N (K+1, M, I, B), silu, dy/dx (M, I, B) or None) with

        y[m,b]      = sum_i silu(x) w_0 + sum_r N_r w_{1+j-K+r}     (= feats @ w),
        dy/dx[m,i,b] = silu'(x) w_0 + sum_r dN_r w_{1+j-K+r}         (``_grad_x`` with H = w).

    The dense features are never formed: for the largest layer of the paper's networks (39
    inputs) they were 10 MB a step written, then read twice (output and weight gradient), for K+2
    nonzero terms out of 1+C per input. The input gradient is dy/dx times grad_out."""
    j, N, dN, silu, dsilu = local_planes(x, grid, K, with_derivative, pointwise=True)
    w_base = w[:, 0]  # (M, I, 1)
    w_local = [_picked(w, j, K, r) for r in range(K + 1)]
    term = silu * w_base
    for r in range(K + 1):
        term = term + N[r] * w_local[r]
    slope = None
    if with_derivative:
        slope = dsilu * w_base
        for r in range(K + 1):
            slope = slope + dN[r] * w_local[r]
    return term.sum(1), j, torch.stack(N), silu, slope


def _grad_w_one(g: torch.Tensor, j: torch.Tensor, N: torch.Tensor, silu: torch.Tensor, K: int, C: int) -> torch.Tensor:
    """d loss / d w (M, 1+C, I) = sum_b feats[m,f,i,b] g[m,b] of a layer with one output
    (g = grad_out[..., 0] (M, B)) from the local basis: feature c's term is the N_r g that
    ``_basis_planes`` selects for it; each feature a streaming reduction along the batch, summed
    alike for every pack size (compiled)."""
    g = g.unsqueeze(1)  # (M, 1, B)
    planes = _basis_planes(j, [N[r] * g for r in range(K + 1)], C, K)  # feats * g, never stacked
    return torch.stack([(silu * g).sum(-1), *(p.sum(-1) for p in planes)], 1)


def _forward_eager(x: torch.Tensor, grid: torch.Tensor, K: int, with_derivative: bool):
    j, N, silu, dN, dsilu = _planes(x, grid, K, with_derivative)
    return _dense_scatter(j, N, silu, grid.shape[-1] - K - 1, K), j, dN, dsilu


def _grad_x_eager(h: torch.Tensor, j: torch.Tensor, dN: torch.Tensor, dsilu: torch.Tensor, K: int) -> torch.Tensor:
    return _grad_x(h, None, j, dN, dsilu, K)


def _doubled(t: torch.Tensor) -> torch.Tensor:
    """Two copies of a one-member t along the batch, laid out in memory as t is: a column-major
    matrix (a transposed view) stays column-major, as a pack's operand is."""
    if t.stride(-2) == 1 and t.stride(-1) != 1:
        return torch.cat([t.mT, t.mT]).mT
    return torch.cat([t, t])


def _bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.bmm, except that a lone matrix-vector product (one member, one column) is doubled:
    it would take BLAS's gemv path, which rounds differently from the batched kernel a pack uses.
    The copies keep the operands' layout: MKL's AVX2 kernels (MKL_ENABLE_INSTRUCTIONS=AVX2, an
    AVX2 host) round a row-major copy of a column-major operand differently from the pack."""
    if a.shape[0] == 1 and b.shape[-1] == 1:
        return torch.bmm(_doubled(a), _doubled(b))[:1]
    return torch.bmm(a, b)


_EAGER = {"forward": _forward_eager, "grad_x": _grad_x_eager}
_TO_COMPILE = {"forward": _forward, "grad_x": _grad_x_pointwise, "forward_one": _forward_one, "grad_w_one": _grad_w_one}


def _kernel(compiled: bool, name: str):
    """One of the layer's elementwise kernels, fused by torch.compile when asked: "forward" (the
    local basis and the dense features) and "grad_x" (the input gradient); compiled only,
    "forward_one" and "grad_w_one" (a layer with one output, which never forms its features).

    For these tiny networks the elementwise work around the matmuls is a large part of a
    training step; the compiled kernels make one pass each over (M, B, I) planes and never
    materialize the dense derivative of the features. They select by pointwise compares, not
    gathers (``basis._knots_windowed``). Shapes are static (one compile per layer and batch shape,
    cached on disk by inductor).
    """
    if not compiled:
        return _EAGER[name]
    return static(_TO_COMPILE[name])  # one compile per (layer, batch shape)


class _KANMatmul(torch.autograd.Function):
    """y = feats(x) @ w for w (M, (1+C)*I, O), with the features held batch last,
    feats (M, (1+C)*I, B); gradients to x (through the K+2 nonzero feature derivatives per
    input) and to w; none to the grid.

    The products are taken in the form BLAS's batched gemm runs fastest for these shapes:
    y^T = w^T feats and H = w grad_out^T, with the B or (1+C)*I columns, not the O <= 14 ones
    (2 to 3x faster than feats^T w for the Concrete shapes, one and two threads), and
    d loss / d w = feats grad_out, which comes out in w's layout (0.50 against 0.76 ms for
    grad_out^T feats^T and its copy into that layout, the 26-input Concrete layer of a pack of
    70, one thread: scripts/benchmarks/bench_step.py). Compiled, a layer with one output takes
    ``_KANOne`` instead; eager, its products are ``_bmm``'s.
    """

    @staticmethod
    def forward(ctx, x, grid, w, K, compiled):
        M, B, I = x.shape
        F, O = w.shape[1], w.shape[-1]
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[2]
        feats, j, dN, dsilu = _kernel(compiled, "forward")(x.transpose(1, 2).contiguous(), grid, K, need_x)
        feats = feats.view(M, F * I, B)
        ctx.K, ctx.compiled, ctx.w_shape = K, compiled, w.shape
        ctx.save_for_backward(w if need_x else None, j, dN, dsilu, feats if need_w else None)
        w = w.reshape(M, F * I, O)
        if O == 1:
            return _bmm(feats.transpose(1, 2), w)
        return torch.bmm(w.transpose(1, 2), feats).transpose(1, 2)

    @staticmethod
    def backward(ctx, grad_out):
        w, j, dN, dsilu, feats = ctx.saved_tensors
        grad_x = grad_w = None
        M, B, O = grad_out.shape
        grad_out = grad_out.contiguous()
        if w is not None:
            F, I = w.shape[1], w.shape[2]
            if O == 1:  # H = w grad_out^T is an outer product
                grad_x = _grad_x(w.reshape(M, F, I, 1), grad_out.view(M, B), j, dN, dsilu, ctx.K).transpose(1, 2)
            else:
                h = torch.bmm(w.reshape(M, F * I, O), grad_out.transpose(1, 2)).view(M, F, I, B)
                grad_x = _kernel(ctx.compiled, "grad_x")(h, j, dN, dsilu, ctx.K).transpose(1, 2)
        if feats is not None:  # in w's own layout: no copy into it
            grad_w = _bmm(feats, grad_out).view(ctx.w_shape)
        return grad_x, None, grad_w, None, None


class _KANOne(torch.autograd.Function):
    """y = feats(x) @ w for a layer with one output, w (M, 1+C, I, 1), compiled: the output, the
    input's slope and the weight gradient from the local basis (``_forward_one``,
    ``_grad_w_one``), never the dense features; gradients to x and w, none to the grid."""

    @staticmethod
    def forward(ctx, x, grid, w, K):
        need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[2]
        y, j, N, silu, slope = _kernel(True, "forward_one")(x.transpose(1, 2).contiguous(), grid, w, K, need_x)
        ctx.K, ctx.w_shape = K, w.shape
        ctx.save_for_backward(slope, *((j, N, silu) if need_w else (None, None, None)))
        return y.unsqueeze(-1)

    @staticmethod
    def backward(ctx, grad_out):
        slope, j, N, silu = ctx.saved_tensors
        M, B, _ = grad_out.shape
        g = grad_out.reshape(M, B).contiguous()
        grad_x = (slope * g.unsqueeze(1)).transpose(1, 2) if slope is not None else None
        grad_w = None
        if j is not None:
            C = ctx.w_shape[1] - 1
            grad_w = _kernel(True, "grad_w_one")(g, j, N, silu, ctx.K, C).view(ctx.w_shape)
        return grad_x, None, grad_w, None


def kan_matmul(x: torch.Tensor, grid: torch.Tensor, w: torch.Tensor, K: int, compiled: bool = False) -> torch.Tensor:
    """y[m,b,o] = sum_f sum_i feats[m,b,f,i] w[m,f,i,o] with feats = [silu(x), B_0(x), ..., B_{C-1}(x)].

    x (M, B, I), grid (M, I, T), w (M, 1+C, I, O) -> (M, B, O); differentiable in x
    (closed-form derivative of the K+1 nonzero basis functions, ``local_planes``) and in w,
    not in the grid. ``compiled``: the elementwise kernels run as torch.compile kernels.
    """
    if compiled and w.shape[-1] == 1:
        return _KANOne.apply(x, grid.to(x.dtype), w, K)
    return _KANMatmul.apply(x, grid.to(x.dtype), w, K, compiled)
