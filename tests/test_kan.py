"""The gated multi-exit KAN core against closed forms and the paper's architecture facts."""

import ast
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from kanx.kan import gates
from kanx.kan.basis import local_planes
from kanx.kan.kernels import _dense_scatter, _planes, kan_matmul
from kanx.kan.network import Condition, GatedKAN, KANSpec
from kanx.kan.objective import Costs, complexity, complexity_scale, data_loss, exit_mse
from kanx.kan.spline import _cox_de_boor, adaptive_grid, bspline_basis, fit_coefficients, spline_values, uniform_grid
from kanx.kan.structure import model_structure, trace

# (width, condition) -> contributing edges / depth for every exit k (X, FX: pi one-hot on k).
ARCHITECTURE_FACTS = {
    (13, 13, 13, 1): {"Baseline": ["351/3"], "F": ["546/3"], "X": ["13/1", "182/2", "351/3"],
                      "FX": ["13/1", "195/2", "546/3"]},
    (5, 5, 5, 5, 1): {"Baseline": ["80/4"], "F": ["170/4"], "X": ["5/1", "30/2", "55/3", "80/4"],
                      "FX": ["5/1", "35/2", "90/3", "170/4"]},
    (2, 4, 4, 4, 2): {"Baseline": ["48/4"], "F": ["100/4"], "X": ["4/1", "16/2", "32/3", "48/4"],
                      "FX": ["4/1", "20/2", "52/3", "100/4"]},
    (1, 5, 5, 5, 1): {"Baseline": ["60/4"], "F": ["106/4"], "X": ["1/1", "10/2", "35/3", "60/4"],
                      "FX": ["1/1", "11/2", "46/3", "106/4"]},
    (2, 5, 5, 5, 1): {"Baseline": ["65/4"], "F": ["122/4"]},
    (3, 3, 3, 3): {"Baseline": ["27/3"], "F": ["54/3"], "X": ["9/1", "18/2", "27/3"], "FX": ["9/1", "27/2", "54/3"]},
}


@pytest.mark.parametrize(("width", "condition"), [(w, c) for w, facts in ARCHITECTURE_FACTS.items() for c in facts])
def test_ungated_structure_matches_the_paper(width, condition):
    model = GatedKAN(KANSpec(width), Condition.from_name(condition), seeds=[0])
    got = []
    for k in range(model.L if model.condition.exits else 1):
        if model.condition.exits:
            with torch.no_grad():
                model.exit_logits.fill_(0.0)
                model.exit_logits[0, k] = 10.0  # pi one-hot on exit k
        s = model_structure(model)[0]
        got.append(f"{s.contributing_edges}/{s.depth}")
    assert got == ARCHITECTURE_FACTS[width][condition]


def _closed(width, forward):
    """All-closed edge masks, per stage, for a network without exits."""
    L = len(width) - 1
    return [np.zeros((sum(width[: k + 1]) if forward else width[k], width[k + 1]), dtype=bool) for k in range(L)]


def test_trace_counts_only_edges_on_input_output_paths():
    w = [2, 2, 2, 1]
    e = _closed(w, forward=False)
    e[0][0, 0] = e[1][0, 0] = e[2][0, 0] = True  # x0 -> h1_0 -> h2_0 -> out
    s = trace(w, False, e)
    assert (s.contributing_edges, s.depth, s.bias_terms) == (3, 3, 0)
    e[0][1, 1] = True  # x1 -> h1_1, and h1_1 goes nowhere: no path to the output
    e[1][1, 1] = True  # h1_1 -> h2_1, h2_1 goes nowhere: a dead-end branch
    assert trace(w, False, e).contributing_edges == 3


def test_trace_merges_a_bias_chain_into_one_term_per_component():
    w = [2, 2, 2, 1]
    e = _closed(w, forward=False)
    e[0][0, 0] = e[1][0, 0] = e[2][0, 0] = True  # the path
    e[1][1, 1] = e[2][1, 0] = True  # h1_1 (no input reaches it) -> h2_1 -> out: a 2-edge bias chain
    s = trace(w, False, e)
    assert (s.path_edges, s.bias_terms, s.contributing_edges) == (3, 1, 4)
    # A second, separate constant chain: h1_0 is on the path, so use a new route into h2_0.
    e[1][1, 0] = True  # h1_1 -> h2_0: joins the first chain at h1_1: still one component
    assert trace(w, False, e).bias_terms == 1


def test_trace_counts_bias_components_not_chains():
    w = [1, 2, 2, 2]  # two outputs
    e = _closed(w, forward=False)
    e[1][0, 0] = e[2][0, 0] = True  # h1_0 -> h2_0 -> out_0: no input feeds h1_0
    e[1][1, 1] = e[2][1, 0] = True  # h1_1 -> h2_1 -> out_0: a second constant into the same sum
    s = trace(w, False, e)
    assert (s.path_edges, s.depth, s.bias_terms, s.contributing_edges) == (0, 0, 1, 1)
    e[2][1, 0], e[2][1, 1] = False, True  # the second chain now feeds out_1: a separate bias term
    assert trace(w, False, e).bias_terms == 2


def test_trace_gives_a_skip_path_its_true_length():
    w = [2, 3, 3, 1]
    e = _closed(w, forward=True)  # stage k reads [x0, ..., xk]
    e[2][0, 0] = True  # x0_0 -> out directly through a forward connection
    s = trace(w, True, e)
    assert (s.contributing_edges, s.depth) == (1, 1)
    e[0][1, 2] = True  # x0_1 -> h1_2
    e[2][2 + 2, 0] = True  # h1_2 (input index 2 + 2 of stage 2) -> out, skipping layer 2
    s = trace(w, True, e)
    assert (s.contributing_edges, s.depth) == (3, 2)


# ------------------------------------------------------------------ B-splines


def cox_de_boor(i, k, t, x):
    """Direct scalar Cox-de Boor recursion (reference)."""
    if k == 0:
        return 1.0 if t[i] <= x < t[i + 1] else 0.0
    left = 0.0 if t[i + k] == t[i] else (x - t[i]) / (t[i + k] - t[i]) * cox_de_boor(i, k - 1, t, x)
    right = (0.0 if t[i + k + 1] == t[i + 1] else (t[i + k + 1] - x) / (t[i + k + 1] - t[i + 1])
             * cox_de_boor(i + 1, k - 1, t, x))
    return left + right


def test_basis_matches_direct_cox_de_boor_and_sums_to_one():
    G, K = 7, 3
    grid = uniform_grid(1, 1, G, K)
    grid[..., K:-K] += torch.linspace(0, 0.05, G + 1) ** 2  # a non-uniform grid
    x = torch.linspace(-1.3, 1.3, 97, dtype=torch.float64)
    basis = bspline_basis(x.view(1, -1, 1), grid, K)[0, :, 0]  # (N, C)
    t = grid[0, 0].tolist()
    ref = torch.tensor([[cox_de_boor(i, K, t, float(v)) for i in range(G + K)] for v in x], dtype=torch.float64)
    assert torch.allclose(basis, ref, atol=1e-6)
    inside = (x >= t[K]) & (x < t[-K - 1])
    assert torch.allclose(basis[inside].sum(-1), torch.ones(int(inside.sum()), dtype=torch.float64), atol=1e-6)


def _fitted_layer(fn, G=10, K=3):
    model = GatedKAN(KANSpec((1, 1), grid_size=G, spline_order=K), Condition(), seeds=[0], dtype=torch.float64)
    layer = model.stages[0]
    xs = torch.linspace(-1, 1, 201, dtype=torch.float64).view(1, -1, 1)
    with torch.no_grad():
        layer.coef.copy_(fit_coefficients(xs, fn(xs).unsqueeze(-1), layer.grid, K))
    return layer


def test_grid_update_preserves_a_cubic_exactly():
    cubic = lambda x: 0.3 * x**3 - x**2 + 0.5 * x - 0.2  # noqa: E731
    layer = _fitted_layer(cubic)
    samples = (torch.rand(1, 300, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1.6 - 0.9)
    layer.update_grid(samples, grid_eps=0.02)
    assert not torch.allclose(layer.grid, uniform_grid(1, 1, 10, 3).to(layer.grid))  # the knots moved
    got = layer.edge_spline(samples)[0, :, 0, 0]
    assert torch.allclose(got, cubic(samples[0, :, 0]), atol=1e-6)


def test_grid_update_keeps_a_smooth_function_on_the_samples():
    fn = lambda x: torch.sin(2 * x)  # noqa: E731
    layer = _fitted_layer(fn)
    samples = torch.rand(1, 500, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 1.8 - 0.9
    before = layer.edge_spline(samples)
    layer.update_grid(samples, grid_eps=0.02)
    after = layer.edge_spline(samples)
    assert (after - before).abs().max() < 1e-3

@pytest.mark.parametrize("points", [None, 256])
def test_grid_refit_solves_least_squares_on_all_samples_unless_told_otherwise(points):
    # pykan refits on every sample; grid_refit_points=256 on evenly spaced order statistics.
    # Reference: numpy's lstsq on the direct Cox-de Boor basis at all 1,000 samples.
    fn = lambda x: torch.sin(3 * x) + 0.4 * torch.cos(7 * x)  # noqa: E731
    layer = _fitted_layer(fn, G=5)
    samples = (torch.randn(1, 1000, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
               * 0.35).clamp(-0.95, 0.95)
    old = layer.edge_spline(samples)[0, :, 0, 0].detach().numpy()
    layer.update_grid(samples, grid_eps=0.02, points=points)
    t = layer.grid[0, 0].tolist()
    xs = samples[0, :, 0].tolist()
    basis = np.array([[cox_de_boor(i, layer.K, t, v) for i in range(layer.G + layer.K)] for v in xs])
    ref = np.linalg.lstsq(basis, old, rcond=None)[0]
    gap = np.abs(layer.coef[0, 0, 0].detach().numpy() - ref).max()
    if points is None:
        assert gap < 1e-8, f"refit differs from least squares on all samples by {gap:.3g}"
    else:
        assert gap > 1e-6, "a refit on 256 order statistics should not equal the all-sample solve here"



def _tied_samples():
    """The age column of the Concrete data in miniature: its 14 values with their counts,
    41% of the samples on one of them, min-max scaled into the initial grid."""
    values = torch.tensor([1, 3, 7, 14, 28, 56, 90, 91, 100, 120, 180, 270, 360, 365], dtype=torch.float64)
    counts = torch.tensor([2, 134, 126, 62, 425, 91, 54, 22, 52, 3, 26, 13, 6, 14])
    x = values.repeat_interleave(counts)
    return ((x - x.min()) / (x.max() - x.min()) * 1.8 - 0.9).view(1, -1, 1)


@pytest.mark.parametrize(("rtol", "bounded"), [(None, False), (1e-4, True)])
def test_grid_refit_on_tied_samples(rtol, bounded):
    # Plain least squares (pykan's refit) reproduces the spline on tied samples but swings
    # far outside its old range between them; grid_refit_rtol keeps it bounded.
    layer = _fitted_layer(lambda x: torch.sin(2 * x))
    samples = _tied_samples()
    before = layer.edge_spline(samples)
    layer.update_grid(samples, grid_eps=0.02, rtol=rtol)
    assert (layer.edge_spline(samples) - before).abs().max() < 1e-2
    between = torch.linspace(samples.min().item(), samples.max().item(), 2001, dtype=torch.float64).view(1, -1, 1)
    swing = layer.edge_spline(between).abs().max().item()
    assert (swing < 2.0) == bounded, f"max |spline| between the samples: {swing:.3g}"


@pytest.mark.parametrize("rtol", [None, 1e-4])
def test_the_qr_reduced_refit_equals_the_plain_pseudoinverse(rtol):
    # What CUDA runs (a tall system reduced to its C x C triangle first) must cut the same
    # singular values and give the same coefficients as pinv on the whole system, also on
    # tied samples, where plain least squares is near-singular.
    g = torch.Generator().manual_seed(0)
    tied = _tied_samples()
    # (1, N, 2)
    x = torch.cat([tied, (torch.rand(1, tied.shape[1], 1, generator=g, dtype=torch.float64) * 1.8 - 0.9)], dim=-1)
    grid = adaptive_grid(torch.sort(x, dim=1).values, 10, 3, 0.02)
    y = torch.randn(1, x.shape[1], 2, 3, generator=g, dtype=torch.float64)
    plain = fit_coefficients(x, y, grid, 3, rtol, reduce_tall=False)
    reduced = fit_coefficients(x, y, grid, 3, rtol, reduce_tall=True)
    scale = plain.abs().max().item()
    assert (plain - reduced).abs().max().item() <= 1e-9 * max(scale, 1.0), f"largest coefficient {scale:.3g}"


def test_spline_values_match_basis_times_coefficients():
    grid = uniform_grid(2, 3, 5, 3)
    coef = torch.randn(2, 3, 4, 8, dtype=torch.float64)
    x = torch.rand(2, 6, 3, dtype=torch.float64) * 2 - 1
    ref = torch.einsum("mbic,mioc->mbio", bspline_basis(x, grid, 3), coef)
    assert torch.allclose(spline_values(x, grid, coef, 3), ref)



def _test_grids(M=3, I=4, G=10, K=3):
    """Per-(member, input) grids: uniform; non-uniform; and after a grid update on tied data
    (grid_eps = 0: knots of multiplicity up to K+1, as on Concrete's age column)."""
    grid = uniform_grid(M, I, G, K)
    grid[1, :, K:-K] += torch.linspace(0, 0.05, G + 1) ** 2 * torch.arange(1, I + 1, dtype=torch.float64).view(I, 1)
    tied = _tied_samples().expand(1, -1, I).clone()
    tied[..., 1] = torch.where(tied[..., 1] > 0, tied[..., 1], torch.zeros(()))  # many zeros, as an admixture
    grid[2] = adaptive_grid(torch.sort(tied, dim=1).values, G, K, 0.0)[0]
    return grid


def _test_points(grid, B=60, seed=0):
    """x (M, B, I): inside and outside the grid, and exactly on every knot."""
    M, I, T = grid.shape
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(M, B, I, generator=g, dtype=torch.float64) * 4 - 2
    x[:, :T] = grid.transpose(1, 2)
    return x


def _dense_reference(x, grid, w, K):
    """y = [silu(x), B(x)] @ w by the dense Cox-de Boor recursion, with autograd's gradients."""
    basis, _ = _cox_de_boor(x.unsqueeze(-1), grid.unsqueeze(1), K, False)
    feats = torch.cat([torch.nn.functional.silu(x).unsqueeze(-1), basis], dim=-1)  # (M, B, I, 1+C)
    return torch.einsum("mbif,mfio->mbo", feats, w)


def local_basis(x, grid, K, with_derivative=False):
    """basis.local_planes for x (M, B, I) and grid (M, I, T) -> (j, N, dN) with j (M, B, I) and N, dN
    stacked on a last axis (M, B, I, K+1): N[..., r] = B_{j-K+r}(x)."""
    j, N, dN, _, _ = local_planes(x.transpose(1, 2), grid, K, with_derivative)
    return (j.transpose(1, 2), torch.stack(N, -1).transpose(1, 2),
            (torch.stack(dN, -1).transpose(1, 2) if dN is not None else None))


def spline_features(x, grid, K):
    """[silu(x), B_0(x), ..., B_{C-1}(x)] of every input without gradient, from the eager local basis:
    x (M, B, I), grid (M, I, T) -> (M, B, I, 1+C)."""
    grid = grid.to(x.dtype)
    j, N, silu, _, _ = _planes(x.transpose(1, 2), grid, K, False)
    return _dense_scatter(j, N, silu, grid.shape[-1] - K - 1, K).permute(0, 3, 2, 1)


def test_local_basis_matches_dense_cox_de_boor():
    # The K+1 basis functions of the local (de Boor) evaluation and their derivatives are the
    # dense recursion's nonzero ones, on knots, outside the grid and on repeated knots.
    K = 3
    grid = _test_grids()
    assert (grid[2].diff(dim=-1) == 0).any()  # repeated knots
    x = _test_points(grid)
    dense, dense_d = _cox_de_boor(x.unsqueeze(-1), grid.unsqueeze(1), K, True)  # (M, B, I, C)
    j, N, dN = local_basis(x, grid, K, with_derivative=True)
    C = dense.shape[-1]
    idx = j.long().unsqueeze(-1) + torch.arange(-K, 1)  # basis index of N[..., r]
    valid = (idx >= 0) & (idx < C)
    for got, ref in ((N, dense), (dN, dense_d)):
        picked = torch.gather(ref, -1, idx.clamp(0, C - 1))
        assert torch.allclose(torch.where(valid, got, 0.0), torch.where(valid, picked, 0.0), rtol=1e-12, atol=1e-12)
        # everything else is zero: the K+1 values carry the whole sum
        assert torch.allclose(torch.where(valid, got, 0.0).sum(-1), ref.sum(-1), rtol=1e-12, atol=1e-12)
    feats = spline_features(x, grid, K)
    assert torch.allclose(feats[..., 1:], dense, rtol=1e-12, atol=1e-12)
    outside = (x < grid[:, None, :, 0]) | (x >= grid[:, None, :, -1])
    assert outside.any() and (feats[..., 1:][outside] == 0).all()


def test_the_compiled_kernels_knot_selects_give_the_gathered_basis_exactly():
    # _knots_windowed (compiled kernels) against _knots_gathered (eager): the same local basis to
    # the last bit, on grids with repeated knots and at x inside, outside and on every knot.
    K = 3
    grid = _test_grids()
    x = _test_points(grid).transpose(1, 2).contiguous()  # (M, I, B): batch last
    gathered = local_planes(x, grid, K, True, pointwise=False)
    windowed = local_planes(x, grid, K, True, pointwise=True)
    for a, b in zip(gathered, windowed, strict=True):
        for u, v in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b], strict=True):
            assert torch.equal(u, v)


# torch.compile: make test-full
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("O", [1, 5])
def test_kan_matmul_matches_the_dense_layer_in_float32(compiled, O):
    # Values and gradients (x and the folded weights) of the fused layer against the dense
    # Cox-de Boor layer in float64 from the same float32 inputs: equal to float32 rounding.
    K = 3
    grid = _test_grids().float()
    x = _test_points(grid.double()).float()
    w = torch.randn(x.shape[0], grid.shape[-1] - K, x.shape[-1], O, generator=torch.Generator().manual_seed(1))
    gy = torch.randn(x.shape[0], x.shape[1], O, generator=torch.Generator().manual_seed(2))
    xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = kan_matmul(xa, grid, wa, K, compiled)
    gx, gw = torch.autograd.grad(y, (xa, wa), gy)
    xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
    yr = _dense_reference(xr, grid.double(), wr, K)
    gxr, gwr = torch.autograd.grad(yr, (xr, wr), gy.double())
    for name, got, ref in (("y", y, yr), ("grad x", gx, gxr), ("grad w", gw, gwr)):
        scale = ref.abs().max().item()
        err = (got.double() - ref).abs().max().item()
        assert err <= 1e-6 * scale * x.shape[-1] * (K + 2), f"{name}: max error {err:.3g} at scale {scale:.3g}"


# torch.compile: make test-full
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_layer_after_a_grid_update_on_tied_data_matches_the_dense_formula(compiled):
    # KANLayer.forward = sum_i z (w_b silu(x_i) + w_s sum_c c_c B_c(x_i)) with gradients to x and
    # coef, after update_grid on tied inputs (repeated knots) and at x outside and on the knots.
    model = GatedKAN(KANSpec((4, 3)), Condition(), seeds=[0, 1])
    layer = model.stages[0]
    layer.compiled = compiled
    samples = _tied_samples().expand(2, -1, 4).float()
    layer.update_grid(samples, grid_eps=0.0)
    assert (layer.grid.diff(dim=-1) == 0).any()
    x = _test_points(layer.grid.double(), seed=3).float().requires_grad_()
    gate = torch.rand(2, 4, 3, generator=torch.Generator().manual_seed(4))
    y = layer(x, gate)
    gy = torch.randn_like(y)
    gx, gc = torch.autograd.grad(y, (x, layer.coef), gy)
    xr, cr = x.detach().double().requires_grad_(), layer.coef.detach().double().requires_grad_()
    basis = bspline_basis(xr, layer.grid.double(), layer.K)  # (M, B, I, C)
    edge = (layer.scale_base.double().unsqueeze(1) * torch.nn.functional.silu(xr).unsqueeze(-1)
            + layer.scale_sp.double().unsqueeze(1) * torch.einsum("mbic,mioc->mbio", basis, cr))
    yr = (gate.double().unsqueeze(1) * edge).sum(2)
    gxr, gcr = torch.autograd.grad(yr, (xr, cr), gy.double())
    for name, got, ref in (("y", y, yr), ("grad x", gx, gxr), ("grad coef", gc, gcr)):
        scale = ref.abs().max().item()
        assert (got.double() - ref).abs().max().item() <= 1e-5 * scale, name


# ------------------------------------------------------------------ gates


@pytest.mark.parametrize("alpha", [-2.5, -1.0, 0.0, 1.5])
def test_expected_z_is_the_probability_that_a_gate_is_open(alpha):
    a = torch.full((200_000,), alpha, dtype=torch.float64)
    z = gates.sample_hard_concrete(
        a, torch.rand(a.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    p = gates.expected_open(torch.tensor(alpha, dtype=torch.float64)).item()
    assert abs((z > 0).double().mean().item() - p) < 1e-2
    assert abs(z.mean().item() - p) > 1e-2  # it is not the mean of z~


def test_hard_threshold_gates():
    assert gates.deterministic_gate(torch.tensor([20.0]))[0] == 1.0
    assert gates.deterministic_gate(torch.tensor([-20.0]))[0] == 0.0
    assert 0.0 < gates.deterministic_gate(torch.tensor([0.1]), "louizos")[0] < 1.0


def test_ablated_gates_are_always_open_and_frozen():
    model = GatedKAN(KANSpec((2, 3, 1)), Condition.from_name("FX"), seeds=[0])
    assert "alpha" not in dict(model.named_parameters())
    assert torch.equal(model.sample_gates(None), torch.ones(1, model.n_edges))
    # z~ at alpha = 20 is exactly 1 for every uniform the sampler allows.
    u = torch.tensor([0.0, 1e-6, 0.5, 1.0])
    assert torch.equal(gates.sample_hard_concrete(torch.full((4,), 20.0), u), torch.ones(4))



def test_forward_connections_sets_the_state_for_a_block_and_gives_the_trainers_back():
    model = GatedKAN(KANSpec((2, 3, 1)), Condition.from_name("F"), seeds=[0])
    model.fc_enabled = False  # the trainer, in the FC warmup
    off = model.edge_mask().sum()
    with model.forward_connections(True):
        assert model.fc_enabled and model.edge_mask().sum() > off
    assert not model.fc_enabled
    with pytest.raises(RuntimeError), model.forward_connections(True):
        raise RuntimeError
    assert not model.fc_enabled


# ------------------------------------------------------------------ objective


def test_complexity_equals_a_hand_computation_with_two_exits():
    # [2, 3, 1] with X: trunk layer 0 (2x3), exit head 0 (2x1), final layer = exit 1 (3x1).
    model = GatedKAN(KANSpec((2, 3, 1)), Condition.from_name("EX"), seeds=[0], dtype=torch.float64)
    rng = np.random.default_rng(0)
    p_open = rng.uniform(0.05, 0.95, model.n_edges)  # E[z] per edge, stage 0 columns [trunk 3 | head 1]
    shift = gates.TAU * math.log(-gates.GAMMA / gates.ZETA)
    pi = np.array([0.3, 0.7])
    with torch.no_grad():
        model.alpha.copy_(torch.tensor(np.log(p_open / (1 - p_open)) + shift).view(1, -1))
        model.exit_logits.copy_(torch.tensor(np.log(pi)).view(1, -1))
    s0 = p_open[:8].reshape(2, 4)  # stage 0: inputs x outputs
    s1 = p_open[8:].reshape(3, 1)
    c = Costs(edge=1.0, node=1.0, exit=1.0)
    C0 = 3 * c.node + s0[:, :3].sum()  # trunk layer 0 with its 3 node costs
    Ch0 = s0[:, 3:].sum()  # exit head 0
    Ch1 = s1.sum()  # final layer (exit 1)
    hand = pi[1] * C0 + pi[0] * Ch0 + pi[1] * Ch1 + c.exit * 1
    assert complexity(model, c).item() == pytest.approx(hand, rel=1e-12)
    # train.exit_pi=tempered: pi = softmax(log pi / tau_x), here (0.3^2, 0.7^2) normalized at tau 1/2
    hot = pi**2 / (pi**2).sum()
    tempered = hot[1] * C0 + hot[0] * Ch0 + hot[1] * Ch1 + c.exit * 1
    assert complexity(model, c, exit_tau=0.5).item() == pytest.approx(tempered, rel=1e-12)


def test_complexity_without_exits_is_the_sum_of_layer_costs():
    model = GatedKAN(KANSpec((2, 3, 1)), Condition.from_name("E"), seeds=[0], dtype=torch.float64)
    ez = gates.expected_open(torch.tensor(-1.0, dtype=torch.float64)).item()
    assert complexity(model).item() == pytest.approx((3 + 6 * ez) + (1 + 3 * ez))


def test_data_loss_sums_outputs_averages_samples_and_weights_exits():
    out = torch.tensor([[[[1.0, 2.0], [0.0, 0.0]], [[3.0, 0.0], [1.0, 1.0]]]])  # (M=1, E=2, B=2, P=2)
    y = torch.zeros(1, 2, 2)
    assert torch.allclose(exit_mse(out, y), torch.tensor([[2.5, 5.5]]))
    eta = torch.tensor([[0.25, 0.75]])
    assert data_loss(out, y, eta).item() == pytest.approx(0.25 * 2.5 + 0.75 * 5.5)
    assert data_loss(out[:, :1], y, None).item() == pytest.approx(2.5)


# ------------------------------------------------------------------ members


def test_members_share_no_gradient():
    model = GatedKAN(KANSpec((2, 3, 3, 1)), Condition.from_name("EFX"), seeds=[0, 1, 2])
    x = torch.rand(3, 16, 2)
    out = model(x, model.sample_gates(torch.rand(3, model.n_edges)))
    loss = data_loss(out, torch.zeros(3, 16, 1), torch.softmax(torch.randn(3, 3), -1)) + complexity(model)
    loss[1].backward()
    for name, p in model.named_parameters():
        assert torch.all(p.grad[[0, 2]] == 0), name
        assert p.grad[1].abs().sum() > 0, name


def test_members_are_initialized_from_their_own_seed():
    a = GatedKAN(KANSpec((3, 4, 1)), Condition.from_name("EFX"), seeds=[5, 7])
    b = GatedKAN(KANSpec((3, 4, 1)), Condition.from_name("EFX"), seeds=[7])
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(pa[1], pb[0]), name
    assert not torch.equal(a.stages[0].coef[0], a.stages[0].coef[1])


def test_complexity_scale_reads_n_as_documented():
    assert complexity_scale("mdl", 824, 64) == pytest.approx(math.log(824) / 824)
    assert complexity_scale("mdl_batch", 824, 64) == pytest.approx(math.log(64) / 64)
    assert complexity_scale("plain", 824, 64) == 1.0
    with pytest.raises(ValueError, match="'bic' is not one of mdl, mdl_batch, plain"):
        complexity_scale("bic", 824, 64)


def _kanx_imports(module: str) -> set[str]:
    """The kanx modules that ``module``'s source imports (at any level of its body)."""
    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    return {n for n in names if n.startswith("kanx")}


def test_the_reference_maths_does_not_import_the_fast_kernels():
    """tests/test_kan.py checks the kernels against kanx.kan.spline: the reference must not be built on them."""
    assert "kanx.kan.kernels" not in _kanx_imports("kanx.kan.spline")


def test_the_model_imports_nothing_of_kanx_but_kanx_kan():
    """GatedKAN takes its noise already split by purpose (MemberLayout.split_noise): it does not
    know how the training noise is drawn (kanx.noise) or anything else outside the model."""
    assert {m for m in _kanx_imports("kanx.kan.network") if not m.startswith("kanx.kan.")} == set()


def test_the_model_and_its_layers_refuse_inputs_and_gates_of_the_wrong_shape():
    model = GatedKAN(KANSpec((2, 3, 1)), Condition.from_name("EFX"), seeds=[0, 1, 2])
    x, gates = torch.rand(3, 8, 2), model.inference_gates()
    assert model(x, gates).shape == (3, 2, 8, 1)
    with pytest.raises(AssertionError, match=r"inputs \(1, 8, 2\) are not \(M=3, B, n_0=2\)"):
        model(x[:1], gates)  # one member's inputs for three
    with pytest.raises(AssertionError, match=r"gates \(3, 12\) are not \(M=3, n_edges=13\)"):
        model(x, gates[:, 1:])
    stage, z = model.stages[0], model.split_edges(gates)[0]
    with pytest.raises(AssertionError, match=r"inputs \(3, 8, 1\) are not \(M=3, B, I=2\)"):
        stage(x[..., :1], z)
    with pytest.raises(AssertionError, match=r"gates \(1, 2, 4\) are not \(M=3, I=2, O=4\)"):
        stage(x, z[:1])
