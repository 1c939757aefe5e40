"""The local (de Boor) form of the B-spline basis: only the K+1 basis functions that can be
nonzero at an input, and their scatter into the C dense columns.

Shapes as in kanx.kan.spline. Shared by the reference maths (kanx.kan.spline: the basis of the
grid update's fits) and the fast kernels (kanx.kan.kernels: the training layer), so that neither
imports the other; tests/test_kan.py checks it against the dense recursion ``spline._cox_de_boor``.
"""

from __future__ import annotations

import torch


def local_planes(x: torch.Tensor, grid: torch.Tensor, K: int, with_derivative: bool, pointwise: bool = False):
    """The K+1 basis functions that can be nonzero at x, by the local (de Boor) form of Cox-de Boor.

    x: (M, I, B) (batch last), grid: (M, I, T) -> (j, N, dN, silu, dsilu) where
      j (M, I, B) int32 is the knot interval t_j <= x < t_{j+1} of x, the largest such j, so the
        interval is nonempty even where knots repeat (a grid update on tied data);
      N = [N_0, ..., N_K], N_r (M, I, B) = B_{j-K+r}(x): every other B_c(x) is 0 (order-K support
        [t_c, t_{c+K+1})); indices j-K+r outside 0..C-1 belong to no basis function and are
        dropped by the callers;
      dN the same for dB/dx (None unless asked); silu(x) = x sigmoid(x) and silu'(x) (None unless asked).
    Outside [t_0, t_{T-1}) N = dN = 0, as in ``spline.bspline_basis`` (j is then clamped to 0..T-2).

    With t_j <= x < t_{j+1} and B^0_j = 1, order p follows from order p-1 (B^{p-1}_{j-p+1+r},
    r = 0..p-1) through temp_r = B^{p-1}_{j-p+1+r} / (t_{j+1+r} - t_{j-p+1+r}):
        B^p_{j-p+r} = (t_{j+r+1} - x) temp_r + (x - t_{j-p+r}) temp_{r-1},  r = 0..p (temp_{-1} = temp_p = 0),
    which is B^p_i = (x - t_i)/(t_{i+p} - t_i) B^{p-1}_i + (t_{i+p+1} - x)/(t_{i+p+1} - t_{i+1}) B^{p-1}_{i+1}
    of ``spline._cox_de_boor`` restricted to i = j-p..j; and, at p = K,
        dB^K_{j-K+r}/dx = K (temp_{r-1} - temp_r),
    which is dB^K_i/dx = K/(t_{i+K} - t_i) B^{K-1}_i - K/(t_{i+K+1} - t_{i+1}) B^{K-1}_{i+1}. Every
    denominator spans [t_j, t_{j+1}], so none is 0 for x inside the grid; outside, where N = 0, a
    guard keeps a degenerate grid from making 0/0. Knots t_{j-K+1} .. t_{j+K} below t_0 or above
    t_{T-1} are read as t_0 and t_{T-1}: they only enter basis functions with indices outside 0..C-1.

    Every tensor here is one (M, I, B) plane (no K+1-wide inner axis) with the batch last, so
    the compiled kernel vectorizes along the batch: full vectors (B is 64 or 128 in the paper,
    where the inputs of a layer number 1 to 39) and one knot per (member, input) broadcast
    along them. The knots around x come from ``_knots_gathered`` (a few large ops: eager) or,
    with ``pointwise`` (the compiled kernels), from ``_knots_windowed``; both give the same
    values.
    """
    T = grid.shape[-1]
    j, t = (_knots_windowed if pointwise else _knots_gathered)(x, grid, K)
    inside = (j >= 0) & (j <= T - 2)
    j = j.clamp(0, T - 2)
    N = [inside.to(x.dtype)]  # B^0_j
    dN = None
    for p in range(1, K + 1):
        temp = []
        for r in range(p):
            span = t[K + r] - t[K - p + r]  # t_{j+1+r} - t_{j-p+1+r}
            temp.append(N[r] / torch.where(span > 0, span, torch.ones_like(span)))
        if with_derivative and p == K:
            dN = [K * ((temp[r - 1] if r > 0 else 0.0) - (temp[r] if r < p else 0.0)) for r in range(p + 1)]
        down = [(t[K + r] - x) * temp[r] for r in range(p)]  # (t_{j+r+1} - x) temp_r
        up = [(x - t[K - p + r]) * temp[r] for r in range(p)]  # (x - t_{j-p+1+r}) temp_r, into r + 1
        N = [down[0]] + [down[r] + up[r - 1] for r in range(1, p)] + [up[p - 1]]
    sig = torch.sigmoid(x)
    dsilu = sig * (1 + x * (1 - sig)) if with_derivative else None
    return j, N, dN, x * sig, dsilu


def _knots_gathered(x: torch.Tensor, grid: torch.Tensor, K: int):
    """(j, t) for x (M, I, B), grid (M, I, T): j (M, I, B) int32 the number of knots <= x minus 1
    (-1 below t_0, T-1 from t_{T-1} on) and t[d] = t_{j-K+1+d}, d = 0..2K-1, read by a gather
    at the index clamped into 0..T-1 (so knots below t_0 read as t_0, above t_{T-1} as t_{T-1}).

    The knots are counted by T pointwise compares, not a reduction over a middle axis, which
    inductor would not vectorize."""
    M, I, B = x.shape
    T = grid.shape[-1]
    j = (grid[..., :1] <= x).to(torch.int32)
    for k in range(1, T):
        j = j + (grid[..., k : k + 1] <= x).to(torch.int32)
    j = j - 1
    flat = grid.reshape(-1)
    base = torch.arange(M * I, device=x.device, dtype=torch.int32).view(M, I, 1) * T  # (M, I, 1)
    return j, [flat[base + (j.clamp(0, T - 2) + (d - K + 1)).clamp(0, T - 1)] for d in range(2 * K)]


def _knots_windowed(x: torch.Tensor, grid: torch.Tensor, K: int):
    """``_knots_gathered`` by pointwise selects only: one pass up the knots keeps the last K knots
    <= x (t_j, t_{j-1}, ...), one pass down keeps the first K knots > x (t_{j+1}, t_{j+2}, ...).
    The same values for a nondecreasing grid (the knots always are), where x lies inside it; outside,
    where every basis function is 0, other finite knots of the grid.

    Compiled, this is 2K selects per knot (K in each pass) and no indirect load: inductor's CPU code loads
    a gathered vector one lane at a time through memory, which made the six knot gathers most of
    the forward kernel's time (its forward kernel is 20-25% faster this way)."""
    T = grid.shape[-1]
    g = [grid[..., k : k + 1] for k in range(T)]  # (M, I, 1) each, broadcast along the batch
    j = torch.zeros(x.shape, dtype=torch.int32, device=x.device)
    below = [g[0].expand_as(x)] * K  # below[e] = t_{j-e}
    for k in range(T):
        le = g[k] <= x
        j = j + le.to(torch.int32)
        below = [torch.where(le, g[k], below[0])] + [torch.where(le, below[e - 1], below[e]) for e in range(1, K)]
    above = [g[T - 1].expand_as(x)] * K  # above[e] = t_{j+1+e}
    for k in range(T - 1, -1, -1):
        gt = g[k] > x
        above = [torch.where(gt, g[k], above[0])] + [torch.where(gt, above[e - 1], above[e]) for e in range(1, K)]
    return j - 1, below[::-1] + above


def scatter_columns(j: torch.Tensor, N: torch.Tensor, C: int, K: int, dim: int) -> torch.Tensor:
    """The C basis columns B_0..B_{C-1} along axis ``dim`` from the local values N (the K+1
    values B_{j-K+r}, r = 0..K, stacked on that axis of j's shape): one scatter into a row padded
    by K zeros on each side, so the indices j-K+r outside 0..C-1 land in the padding."""
    offsets = torch.arange(K + 1, device=j.device).view([-1 if d == dim else 1 for d in range(j.dim() + 1)])
    shape = list(j.shape)
    shape.insert(dim, C + 2 * K)
    padded = torch.zeros(shape, dtype=N.dtype, device=N.device).scatter_(dim, j.long().unsqueeze(dim) + offsets, N)
    return padded.narrow(dim, K, C)
