"""kanx.formula, kanx.symbolic and kanx.symbolic_fit: symbolic export of a trained run.

The fit is checked on known functions (each primitive recovered from its own samples under an
affine map); composition on hand-built GatedKANs whose edges are splines of known functions
(cubic B-splines reproduce polynomials of degree <= 3 exactly, so those edges are exact):
through a forward connection into the final exit, and through exit head 0; the raw-unit
mapping against the network's own predictions; the tolerance option; and Nguyen F1 end to
end through `python -m kanx.formula` on a saved run whose single edge (exit 0) is the
generating function plus a small wiggle, as a short EX run that picks exit 0 would leave it.
"""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
import torch
from helpers import flat_edge, train_run

import kanx
from kanx import formula, symbolic, symbolic_fit
from kanx.data import Scaling
from kanx.kan.network import Condition, GatedKAN, KANSpec
from kanx.kan.spline import fit_coefficients
from kanx.records import seal

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# ------------------------------------------------------------------ the fit

PRIMITIVE_CASES = {  # f, (a, b) with a x + b inside f's domain for x in [-0.7, 1.3]
    "x": (lambda v: v, (1.7, -0.3)),
    "x^2": (lambda v: v**2, (1.5, 0.4)),
    "x^3": (lambda v: v**3, (0.8, 0.5)),
    "x^4": (lambda v: v**4, (1.1, -0.2)),
    "1/x": (lambda v: 1 / v, (0.9, 1.5)),
    "sqrt": (np.sqrt, (2.0, 1.6)),
    "log": (np.log, (1.3, 1.2)),
    "exp": (np.exp, (1.6, 0.2)),
    "sin": (np.sin, (3.0, 0.7)),
    "tanh": (np.tanh, (4.0, -1.0)),
    "abs": (np.abs, (2.0, -0.5)),
}


@pytest.mark.parametrize("name", list(PRIMITIVE_CASES))
def test_each_primitive_recovered_under_an_affine_map(name):
    f, (a, b) = PRIMITIVE_CASES[name]
    x = np.linspace(-0.7, 1.3, 201)
    y = -1.3 * f(a * x + b) + 0.4
    fits = symbolic_fit.fit_curve(x, y)
    best = fits[0]
    assert best.primitive == name, [(g.primitive, g.score) for g in fits[:3]]
    assert best.r2 > 1 - 1e-9
    assert np.abs(best.numpy(x) - y).max() < 1e-6 * np.ptp(y)
    # its sympy form is the same function
    s = sp.Symbol("x")
    assert np.allclose(sp.lambdify(s, best.sympy(s))(x), y, atol=1e-4 * np.ptp(y))


def test_flat_curve_is_zero_and_poor_fits_lose_to_zero():
    x = np.linspace(-1, 1, 101)
    assert symbolic_fit.fit_curve(x, np.full_like(x, 0.3))[0].primitive == "0"
    noise = np.random.default_rng(0).normal(size=x.shape)
    assert symbolic_fit.fit_curve(x, noise)[0].primitive == "0"
    # the generating function of Nguyen F1 is a general cubic, not an affine x^3
    best = symbolic_fit.fit_curve(x, x**3 + x**2 + x)[0]
    assert best.primitive == "cubic" and np.allclose(best.poly, [0, 1, 1, 1], atol=1e-9)


def test_unknown_primitive_is_refused():
    with pytest.raises(ValueError, match="unknown primitive"):
        symbolic_fit.fit_curve(np.linspace(0, 1, 11), np.linspace(0, 1, 11), primitives=["x", "gamma"])


# ------------------------------------------------------------------ hand-built networks


def _hand_model(condition: str, width, edges: dict, exit_k: int) -> GatedKAN:
    """A single-member GatedKAN whose only open edges are ``edges`` {(k, i, o): g}: each a pure
    spline (scale_base 0, scale_sp 1) fitted to g on its grid [-1, 1]."""
    model = GatedKAN(KANSpec(tuple(width)), Condition.from_name(condition), seeds=[0])
    with torch.no_grad():
        alpha = torch.full((model.n_edges,), -10.0)
        for (k, i, o), g in edges.items():
            alpha[flat_edge(model, k, i, o)] = 10.0
            stage = model.stages[k]
            xs = torch.linspace(-1, 1, 200, dtype=torch.float64)
            ys = torch.as_tensor(g(xs.numpy()), dtype=torch.float64)
            coef = fit_coefficients(xs.view(1, -1, 1), ys.view(1, -1, 1, 1), stage.grid[:, i : i + 1].double(), stage.K)
            stage.coef[0, i, o] = coef[0, 0, 0].to(stage.coef.dtype)
            stage.scale_base[0, i, o] = 0.0
            stage.scale_sp[0, i, o] = 1.0
        if model.condition.edge_gates:  # without E every edge stays open (alpha = 20)
            model.alpha.copy_(alpha.unsqueeze(0))
        if model.condition.exits:
            logits = torch.full((model.L,), -5.0)
            logits[exit_k] = 5.0
            model.exit_logits.copy_(logits.unsqueeze(0))
    model.eval()
    return model


# raw inputs x in [1, 5], y in [-3, 1]: scaled = (raw - shift) / scale lands in [-1, 1]
SCALING = Scaling(torch.tensor([3.0, -1.0], dtype=torch.float64), torch.tensor([2.0, 2.0], dtype=torch.float64),
                  torch.tensor([-1.0], dtype=torch.float64), torch.tensor([2.5], dtype=torch.float64), "minmax", True)


def _raw_points(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.uniform(1, 5, n), rng.uniform(-3, 1, n)], axis=1)


def _network(model, scaling, x_raw) -> np.ndarray:
    scaled = scaling.x(torch.as_tensor(x_raw)).unsqueeze(0).float()
    return scaling.y_inverse(model.predict(scaled)[0].double()).numpy()


def _export(model, truth, **kw):
    x_train, x_test = _raw_points(512, 0), _raw_points(256, 1)
    y_train, y_test = truth(x_train[:, 0], x_train[:, 1])[:, None], truth(x_test[:, 0], x_test[:, 1])[:, None]
    return symbolic.export(model, SCALING, x_train, y_train, x_test, y_test, ("x", "y"), ("z",), **kw), x_test


def _fc_model():
    """EFX [2, 2, 1, 1], final exit: x -> h1_0 (x^2), then h1_0 -> out and x -> out through
    forward connections (sin(2 h) and x / 2)."""
    # stage 2 reads [x, y, h1_0, h1_1, h2_0]
    edges = {(0, 0, 0): lambda v: v**2, (2, 2, 0): lambda v: np.sin(2 * v), (2, 0, 0): lambda v: 0.5 * v}
    model = _hand_model("EFX", (2, 2, 1, 1), edges, exit_k=2)

    def truth(x, y):
        u = (x - 3) / 2
        return 2.5 * (np.sin(2 * u**2) + 0.5 * u) - 1

    return model, truth


def test_composition_through_a_forward_connection():
    model, truth = _fc_model()
    f, x_test = _export(model, truth)
    rows = {r["edge"]: r for r in f.edge_table()}
    assert {k: r["primitive"] for k, r in rows.items()} == {"phi_0_0_0": "x^2", "phi_2_0_0": "x", "phi_2_2_0": "sin"}
    assert rows["phi_2_0_0"]["forward"] and rows["phi_2_2_0"]["forward"] and not rows["phi_0_0_0"]["forward"]
    assert f.exit == 2 and f.symbols[0].name == "x"
    # the expression is the composed truth in raw units, and does not depend on y
    assert f.simplified[0].free_symbols == {f.symbols[0]}
    grid = np.stack([np.linspace(1, 5, 101), np.zeros(101)], axis=1)
    for which in ("expressions", "simplified", "printed"):
        assert np.abs(f.lambdified(which)(grid)[:, 0] - truth(grid[:, 0], grid[:, 1])).max() < 5e-3, which
    assert f.metrics["test_rmse_formula"] < 1e-3 and f.metrics["test_rmse_network"] < 1e-3


def test_composition_through_an_exit_head():
    """EFX [2, 2, 1, 1] at exit 0: its head [x, y] -> z (x^3 and tanh); the open trunk edges
    feed exits that are not selected and must not appear."""
    edges = {(0, 0, 2): lambda v: v**3, (0, 1, 2): lambda v: np.tanh(1.5 * v),
             (0, 0, 0): lambda v: v, (1, 2, 1): lambda v: v}
    model = _hand_model("EFX", (2, 2, 1, 1), edges, exit_k=0)

    def truth(x, y):
        return 2.5 * (((x - 3) / 2) ** 3 + np.tanh(1.5 * (y + 1) / 2)) - 1

    f, x_test = _export(model, truth)
    assert f.exit == 0
    assert sorted((e.stage, e.i, e.o, e.fit.primitive) for e in f.edges) == [(0, 0, 2, "x^3"), (0, 1, 2, "tanh")]
    assert all(r["head"] for r in f.edge_table())
    assert np.abs(f.lambdified("printed")(x_test)[:, 0] - truth(*x_test.T)).max() < 5e-3
    assert f.metrics["test_rmse_formula"] == pytest.approx(f.metrics["test_rmse_network"], abs=1e-4)


def test_composition_through_the_trunk_of_a_plain_kan():
    """Baseline [2, 2, 1] (no gates, no FC, no exits): sin(x^2/4 + y/2) through a hidden node
    (which stays inside the next grid, [-1, 1]); every edge is open and appears."""
    edges = {(0, 0, 0): lambda v: 0.25 * v**2, (0, 1, 0): lambda v: 0.5 * v, (1, 0, 0): np.sin}
    model = _hand_model("Baseline", (2, 2, 1), edges, exit_k=1)
    with torch.no_grad():  # the baseline's other edges are open: make them exactly zero
        for k, stage in enumerate(model.stages):
            for i in range(stage.in_features):
                for o in range(stage.out_features):
                    if (k, i, o) not in edges:
                        stage.coef[0, i, o] = 0.0
                        stage.scale_base[0, i, o] = 0.0

    def truth(x, y):
        return 2.5 * np.sin(0.25 * ((x - 3) / 2) ** 2 + 0.5 * (y + 1) / 2) - 1

    f, x_test = _export(model, truth, primitives=("0", "x", "x^2", "sin"))
    chosen = {(e.stage, e.i, e.o): e.fit.primitive for e in f.edges}
    assert len(chosen) == 6  # all open: the zeroed ones are fitted by the constant 0, or (h1_1 = 0) are constant
    assert chosen == {(0, 0, 0): "x^2", (0, 1, 0): "x", (1, 0, 0): "sin", (0, 0, 1): "0",
                      (0, 1, 1): "0", (1, 1, 0): "constant"}
    assert np.abs(f.lambdified("printed")(x_test)[:, 0] - truth(*x_test.T)).max() < 5e-3


def test_raw_unit_mapping_with_every_edge_numeric_is_the_network():
    """tolerance=0 keeps every edge as its spline: the expression (with phi_k_i_o functions)
    is then the network itself, in raw units, on points it never saw."""
    model, truth = _fc_model()
    f, x_test = _export(model, truth, tolerance=0.0)
    assert all(e.numeric for e in f.edges) and f.metrics["numeric_edges"] == 3
    net = _network(model, SCALING, x_test)
    for which in ("expressions", "simplified"):
        assert np.abs(f.lambdified(which)(x_test) - net).max() < 1e-4
    assert {str(fn.func) for fn in f.expressions[0].atoms(sp.Function)} >= {"phi_0_0_0", "phi_2_2_0"}
    assert all("spline" in r and "table" in r for r in f.edge_table())


def test_raw_unit_mapping_of_symbolic_edges():
    """Symbolic edges, shifted and scaled inputs and targets: the formula at raw x equals the
    network's prediction at raw x (undoing the input scaling and target standardization)."""
    model, truth = _fc_model()
    f, x_test = _export(model, truth)
    assert np.abs(f.lambdified()(x_test) - _network(model, SCALING, x_test)).max() < 2e-4
    # the same edges under another scaling give another formula, still the network's
    other = Scaling(torch.tensor([10.0, 0.0], dtype=torch.float64), torch.tensor([0.5, 1.0], dtype=torch.float64),
                    torch.tensor([4.0], dtype=torch.float64), torch.tensor([0.1], dtype=torch.float64), "minmax", True)
    xr = np.stack([np.linspace(9.5, 10.5, 64), np.zeros(64)], axis=1)
    g = symbolic.export(model, other, xr, input_names=("x", "y"))
    assert np.abs(g.lambdified()(xr) - _network(model, other, xr)).max() < 1e-4


def test_tables_are_read_by_column_name():
    """A DataFrame, to export() or to a formula, is read by the input (and output) names: columns
    (y, x) give the formula and the values of (x, y); a column missing or extra is refused."""
    pd = pytest.importorskip("pandas")
    model, truth = _fc_model()
    f, x_test = _export(model, truth)
    x_train = _raw_points(512, 0)

    def frame(x, columns=("y", "x")):
        return pd.DataFrame({c: x[:, "xy".index(c)] for c in columns})

    z_train, z_test = (pd.DataFrame({"z": truth(x[:, 0], x[:, 1])}) for x in (x_train, x_test))
    g = symbolic.export(model, SCALING, frame(x_train), z_train, frame(x_test), z_test, ("x", "y"), ("z",))
    assert g.printed == f.printed and g.metrics == f.metrics
    named = symbolic.export(model, SCALING, frame(x_train, "xy"), z_train)  # the frame names the inputs and outputs
    assert named.input_names == ("x", "y") and named.output_names == ("z",) and named.printed == f.printed
    for which in ("simplified", "printed"):
        np.testing.assert_array_equal(f.lambdified(which)(frame(x_test)), f.lambdified(which)(x_test))
    wrong = r"^formula: the DataFrame's columns \(y\) must be the run's inputs \(x, y\), in any order; missing x$"
    with pytest.raises(ValueError, match=wrong):
        f.lambdified()(frame(x_test, "y"))
    wrong = r"^export: .* must be the run's outputs \(z\), in any order; missing z; extra t$"
    with pytest.raises(ValueError, match=wrong):
        symbolic.export(model, SCALING, x_train, z_train.rename(columns={"z": "t"}), output_names=("z",))


def test_tolerance_keeps_a_poorly_fitted_edge_numeric():
    """An edge no primitive fits (a wiggle) stays numeric under a tolerance; the others stay
    symbolic, and the formula is then within the tolerance of the network."""
    edges = {(0, 0, 2): lambda v: 0.3 * np.sin(9 * v) * v**2 + v, (0, 1, 2): lambda v: v**2}
    model = _hand_model("EFX", (2, 2, 1, 1), edges, exit_k=0)

    def truth(x, y):
        return x + y

    free, _ = _export(model, truth)
    assert free.metrics["fidelity_rel"] > 0.01
    kept, x_test = _export(model, truth, tolerance=0.01)
    assert [(e.i, e.numeric) for e in kept.edges] == [(0, True), (1, False)]
    assert kept.metrics["fidelity_rel"] <= 0.01
    assert np.abs(kept.lambdified()(x_test) - _network(model, SCALING, x_test)).max() < 1e-3


# ------------------------------------------------------------------ Nguyen F1 end to end


def _train_toy(run_dir: Path, *overrides) -> Path:
    return train_run(run_dir, "dataset.n_train=256", "dataset.n_test=128", "train.batch_size=64", "train.compile=false",
                     "train.epochs=2", "train.warmup=1", "train.fc_warmup=1", "device=cpu", *overrides)


@pytest.fixture(scope="module")
def f1_run(tmp_path_factory):
    """A real saved nguyen_f1 EX run (2 epochs through the runner), its model then set to what
    a run that picks exit 0 keeps: one open edge x -> y@exit0 whose activation is the
    standardized generating function plus a wiggle of 2% of the target's spread."""
    run_dir = _train_toy(tmp_path_factory.mktemp("formula") / "nguyen_f1" / "EX", "dataset=nguyen_f1",
                         "+condition=EX", "beta=0.1")
    run = kanx.load_run(run_dir)
    s = run.scaling
    x_mid, x_half = float(s.x_shift[0]), float(s.x_scale[0])
    y_mid, y_sd = float(s.y_shift[0]), float(s.y_scale[0])

    def edge(u):
        x = x_mid + x_half * u
        return (x**3 + x**2 + x - y_mid) / y_sd + 0.02 * np.sin(7 * u)

    head = run.model.trunk_out[0]  # stage 0's columns: [trunk (5) | exit head 0]
    model = _hand_model("EX", run.model.width, {(0, 0, head): edge}, exit_k=0)
    saved = torch.load(run_dir / "model.pt", weights_only=True)
    saved["model"] = {k: v[0] for k, v in model.state_dict().items()}
    torch.save(saved, run_dir / "model.pt")
    seal(run_dir)  # a deliberate edit: the done marker's checksums follow it
    return run_dir


def test_nguyen_f1_formula_end_to_end(f1_run, capsys):
    assert formula.main([str(f1_run)]) == 0
    out = capsys.readouterr().out
    assert "test RMSE" in out and "formula.json" in out
    data = json.loads((f1_run / "formula.json").read_text())
    assert data["exit"] == 0 and len(data["edges"]) == 1
    assert data["edges"][0]["primitive"] == "cubic" and data["edges"][0]["r2"] > 0.999
    m = data["metrics"]
    # the stated factor: the formula's test RMSE within 1.25 x the network's
    assert m["test_rmse_formula"] <= 1.25 * m["test_rmse_network"]
    # the printed expression, parsed back, is the generating function on a grid
    x = sp.Symbol(data["inputs"][0])
    expr = sp.sympify(data["expression"]["y"], locals={x.name: x})
    assert expr.free_symbols == {x}
    grid = np.linspace(-1, 1, 201)
    truth = grid**3 + grid**2 + grid
    assert np.abs(sp.lambdify(x, expr)(grid) - truth).max() < 0.05 * np.ptp(truth)
    poly = sp.Poly(sp.expand(expr), x)
    assert poly.degree() == 3 and np.allclose([float(c) for c in poly.all_coeffs()], [1, 1, 1, 0], atol=0.1)
    for name in ("formula.tex", "formula.png"):
        assert (f1_run / name).stat().st_size > 0
    assert "\\begin{align}" in (f1_run / "formula.tex").read_text()
    # the same formula from the loaded run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = kanx.load_run(f1_run).formula()
    assert f.printed == [data["expression"]["y"]]


def test_cli_refuses_an_unknown_primitive_and_a_missing_run(f1_run, tmp_path, capsys):
    assert formula.main([str(f1_run), "--primitives", "x,gamma", "--no-figure", "--out", str(tmp_path)]) == 2
    assert "unknown primitive" in capsys.readouterr().err
    assert formula.main([str(tmp_path / "nothing")]) == 2
