"""B-spline activations as in pykan, batched over a leading member axis.

Shape vocabulary (used in every comment of kanx.kan):
    M members, B batch, I inputs of a layer, O outputs of a layer,
    G grid intervals, K spline order, C = G + K coefficients, T = G + 2K + 1 knots.

An edge activation is (paper, Background "Kolmogorov-Arnold Networks")

    phi(x) = w_b * b(x) + w_s * sum_{m=1}^{G+K} c_m B_m(x),   b = SiLU,

with B_m the order-K B-spline basis on G intervals of a per-input grid extended by K
knots on each side (``../shared/reference/kan-implementations.md`` section 1).

This module is the reference maths: the grids, the dense Cox-de Boor recursion
(``_cox_de_boor``, against which tests/test_kan.py checks the local basis of kanx.kan.basis
and the fast kernels of kanx.kan.kernels), the basis ``bspline_basis`` and the least-squares
fits of the initialization and the grid update. The training forward and backward run in
kanx.kan.kernels, which this module does not import.
"""

from __future__ import annotations

import torch

from kanx.kan.basis import local_planes, scatter_columns

# Least squares on the tiny systems here is done in float64 with the SVD-based driver:
# pykan's default CPU driver (gelsy) returns wrong minimum-norm solutions for the
# underdetermined initialization fit in float32 (pytorch#71222, #92537).
_LSTSQ_DTYPE = torch.float64


def uniform_grid(M: int, I: int, G: int, K: int, lo: float = -1.0, hi: float = 1.0) -> torch.Tensor:
    """Knots (M, I, T): G uniform intervals on [lo, hi], extended by K knots each side."""
    h = (hi - lo) / G
    knots = lo + h * torch.arange(-K, G + K + 1, dtype=torch.float64)  # (T,)
    return knots.expand(M, I, -1).clone()


def extend_grid(grid: torch.Tensor, K: int) -> torch.Tensor:
    """Extend (…, G+1) interior knots by K knots each side at the end-interval spacing
    h = (hi - lo) / G, as pykan's ``extend_grid``."""
    G = grid.shape[-1] - 1
    h = (grid[..., -1:] - grid[..., :1]) / G
    steps = torch.arange(1, K + 1, dtype=grid.dtype, device=grid.device)
    left = grid[..., :1] - h * steps.flip(0)
    right = grid[..., -1:] + h * steps
    return torch.cat([left, grid, right], dim=-1)


def _safe_reciprocal(d: torch.Tensor) -> torch.Tensor:
    # Repeated knots (possible after a grid update on data with ties) give 0/0 terms that
    # Cox-de Boor defines as 0; pykan does the same with nan_to_num.
    return torch.where(d == 0, torch.zeros_like(d), 1.0 / torch.where(d == 0, torch.ones_like(d), d))


def _cox_de_boor(x: torch.Tensor, g: torch.Tensor, K: int, with_derivative: bool):
    """Order-K basis (and its derivative in x) for x (..., 1) and knots g (..., T).

    Order 0 uses half-open intervals [t_i, t_{i+1}); higher orders follow
    B^p_i = (x - t_i)/(t_{i+p} - t_i) B^{p-1}_i + (t_{i+p+1} - x)/(t_{i+p+1} - t_{i+1}) B^{p-1}_{i+1},
    and dB^K_i/dx = K/(t_{i+K} - t_i) B^{K-1}_i - K/(t_{i+K+1} - t_{i+1}) B^{K-1}_{i+1}.
    """
    basis = ((x >= g[..., :-1]) & (x < g[..., 1:])).to(x.dtype)
    deriv = None
    for p in range(1, K + 1):
        inv_left = _safe_reciprocal(g[..., p:-1] - g[..., : -(p + 1)])
        inv_right = _safe_reciprocal(g[..., p + 1 :] - g[..., 1:-p])
        if with_derivative and p == K:
            deriv = K * (inv_left * basis[..., :-1] - inv_right * basis[..., 1:])
        basis = ((x - g[..., : -(p + 1)]) * inv_left * basis[..., :-1]
                 + (g[..., p + 1 :] - x) * inv_right * basis[..., 1:])
    return basis, deriv


def bspline_basis(x: torch.Tensor, grid: torch.Tensor, K: int) -> torch.Tensor:
    """Order-K B-spline basis (the Cox-de Boor recursion, Eq. of the B-spline background).

    x: (M, B, I), grid: (M, I, T) -> (M, B, I, C) with C = T - K - 1.
    Outside [t_0, t_{T-1}) every basis function is 0, so the spline term vanishes and only
    the SiLU term remains.

    Evaluated in the local form (the K+1 functions that can be nonzero at x, ``basis.local_planes``)
    and scattered into the C columns: the same values as the dense recursion over all C
    (``_cox_de_boor``, the tests' reference; 4e-16 apart in float64), at about a third of its
    cost, which the grid update pays on (M, N, I, C) with every training sample.
    """
    j, N, _, _, _ = local_planes(x.transpose(1, 2), grid.to(x.dtype), K, False)
    return scatter_columns(j, torch.stack(N, -1), grid.shape[-1] - K - 1, K, dim=3).transpose(1, 2)


def fit_coefficients(x: torch.Tensor, y: torch.Tensor, grid: torch.Tensor, K: int, rtol: float | None = None,
                     reduce_tall: bool | None = None) -> torch.Tensor:
    """Least-squares spline coefficients per (member, input).

    x: (M, N, I) sample points, y: (M, N, I, O) spline values to reproduce,
    grid: (M, I, T) -> coef (M, I, O, C). Underdetermined systems get the
    minimum-norm solution (SVD driver), overdetermined ones the least-squares fit.
    ``rtol`` drops singular values below rtol * the largest (None: pinv's default, about
    machine precision, i.e. plain least squares as pykan).

    ``reduce_tall`` (default: on CUDA): a tall system (N > C) is first reduced by QR to its
    C x C triangle, which has the same singular values, so the same ones are cut at the same
    threshold (pinv's default for the N x C matrix when ``rtol`` is None). On CUDA the SVD of
    a batch of tall matrices runs as one solver call per matrix, thousands per grid update of
    a large pack; a C x C one is small enough for the batched solver. The CPU keeps the plain
    pinv, so its numbers stay those of the records already made there.
    """
    basis = bspline_basis(x.to(_LSTSQ_DTYPE), grid.to(_LSTSQ_DTYPE), K)  # (M, N, I, C)
    A = basis.permute(0, 2, 1, 3)  # (M, I, N, C)
    b = y.to(_LSTSQ_DTYPE).permute(0, 2, 1, 3)  # (M, I, N, O)
    N, C = A.shape[-2:]
    if reduce_tall is None:
        reduce_tall = A.is_cuda
    if reduce_tall and N > C:
        if rtol is None:
            rtol = torch.finfo(A.dtype).eps * max(N, C)  # what pinv would use on the N x C matrix
        Q, R = torch.linalg.qr(A)  # (M, I, N, C), (M, I, C, C)
        A, b = R, Q.transpose(-2, -1) @ b
    # pinv is the SVD minimum-norm solution and, unlike lstsq's gelsd driver, also
    # available on CUDA.
    coef = torch.linalg.pinv(A, rtol=rtol) @ b  # (M, I, C, O)
    return coef.permute(0, 1, 3, 2).contiguous()  # (M, I, O, C)


def spline_values(x: torch.Tensor, grid: torch.Tensor, coef: torch.Tensor, K: int) -> torch.Tensor:
    """sum_c coef[m,i,o,c] B_c(x[m,b,i]) for every edge: (M, B, I) -> (M, B, I, O)."""
    basis = bspline_basis(x, grid, K)  # (M, B, I, C)
    return torch.einsum("mbic,mioc->mbio", basis, coef.to(basis.dtype))


def adaptive_grid(x_sorted: torch.Tensor, G: int, K: int, grid_eps: float) -> torch.Tensor:
    """New knots from samples, as pykan's ``update_grid_from_samples``.

    x_sorted: (M, N, I), sorted along N -> (M, I, T). Adaptive knots are the sorted samples
    at indices int(N/G * i), i = 0..G-1, plus the last sample; uniform knots span the sample
    range; the grid is grid_eps * uniform + (1 - grid_eps) * adaptive, then extended by K.
    """
    N = x_sorted.shape[1]
    idx = [int(N / G * i) for i in range(G)] + [N - 1]
    adaptive = x_sorted[:, idx, :].permute(0, 2, 1)  # (M, I, G+1)
    lo, hi = adaptive[..., :1], adaptive[..., -1:]
    steps = torch.arange(G + 1, dtype=x_sorted.dtype, device=x_sorted.device) / G
    uniform = lo + (hi - lo) * steps  # (M, I, G+1)
    interior = grid_eps * uniform + (1.0 - grid_eps) * adaptive
    return extend_grid(interior, K)
