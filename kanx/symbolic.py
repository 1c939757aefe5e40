"""A trained single-member model as sympy expressions: the expression building of the symbolic
export (``kanx.load_run(RUN_DIR).formula()``; the command is ``python -m kanx.formula RUN_DIR``).

What it does. The inference path is traced exactly as for the contributing-edge count and
the drawing (kanx.kan.structure.model_edge_roles: deterministic gates, forward connections
on, the selected exit). The network's output at that exit is a sum over those edges: every
node is the sum of its contributing incoming edges, and an edge adds z * phi(x) of its
source node, phi(x) = scale_base silu(x) + scale_sp sum_c coef_c B_c(x) (KANLayer). Each
contributing edge's curve is sampled on a uniform grid over the range its source node takes
on the run's training inputs (the range the drawing plots) and fitted by every primitive of
the library (kanx.symbolic_fit.fit_curve, which says how the fits are scored); the edge takes
the primitive of least score. An edge whose source is constant (a bias term) is its constant
value.

The edges are composed in sympy through the network's sums, forward connections and the
selected exit head, with the inputs' scaling undone (x_scaled = (x - shift) / scale, by the
scaling saved with the model) and the target standardization undone (y = y_s * scale +
shift): one expression per output in the raw input variables, named as the dataset's
inputs. `tolerance` keeps the formula honest: while the RMSE between formula and network on
the training inputs exceeds tolerance * std(y_train), the symbolic edge whose return to its
exact spline lowers that RMSE most is kept numeric (phi_k_i_o in the expression, written as
a spline table), so the export stays within the tolerance of the network.

The formula is expanded by sympy (and with full_simplify also passed through sympy.simplify,
which takes seconds to minutes), printed with 4 significant digits, more where rounding
would move it by over 1e-3 std(y_train) on the training inputs. Nothing here reads a run
folder (kanx.load does, and imports this module when asked for a formula).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import sympy as sp
import torch

from kanx.kan.network import GatedKAN
from kanx.kan.spline import bspline_basis
from kanx.kan.structure import dest_node, model_edge_roles, source_node, trained_inference_gates
from kanx.symbolic_fit import COMPLEXITY, DEFAULT_PRIMITIVES, R2_FLOOR, SIMPLICITY, Fit, check_options, fit_curve
from kanx.tables import by_name, is_frame

N_SAMPLES = 201  # points per edge curve
SIG_DIGITS = 4  # least significant digits of the printed expression
PRINT_RTOL = 1e-3  # ... raised until it is within this RMSE (in std(y_train)) of the full-precision one


# ------------------------------------------------------------------ the network's edges


@dataclass
class Edge:
    """One contributing edge: stage k, input i of the stage, column o ([trunk | head])."""

    stage: int
    i: int
    o: int
    src: tuple  # ("x", layer, unit)
    dst: tuple  # ("x", layer, unit) or ("y", exit, output)
    role: str  # "path" or "bias"
    lo: float  # range of the source node over the training inputs (model-scaled)
    hi: float
    xs: np.ndarray  # the sampled curve z * phi(x)
    ys: np.ndarray
    spline: dict  # what evaluates phi exactly: gate, scale_base, scale_sp, order, knots, coef
    variance: float = 0.0  # of z * phi over the training inputs (model-scaled)
    share: float = 1.0  # variance / the variance of the network's (scaled) output
    fits: list[Fit] = field(default_factory=list)  # best first
    numeric: bool = False  # kept as its spline (tolerance)

    @property
    def name(self) -> str:
        return f"phi_{self.stage}_{self.i}_{self.o}"

    @property
    def constant(self) -> bool:
        return self.hi - self.lo <= 1e-12

    @property
    def fit(self) -> Fit:
        return self.fits[0]

    @property
    def forward(self) -> bool:
        return self.src[1] < self.stage

    def exact(self, x: np.ndarray) -> np.ndarray:
        """z * phi(x), the network's own activation (float64)."""
        return spline_activation(self.spline, x)

    def value(self, x: np.ndarray) -> np.ndarray:
        return self.exact(x) if self.numeric else self.fit.numpy(x)


def spline_activation(spline: dict, x) -> np.ndarray:
    """z * (scale_base silu(x) + scale_sp sum_c coef_c B_c(x)) for one edge's spline dict."""
    xt = torch.as_tensor(np.asarray(x, dtype=np.float64)).reshape(1, -1, 1)
    grid = torch.tensor(spline["knots"], dtype=torch.float64).reshape(1, 1, -1)
    basis = bspline_basis(xt, grid, int(spline["order"]))[0, :, 0]  # (N, C)
    sp_val = basis @ torch.tensor(spline["coef"], dtype=torch.float64)
    val = spline["gate"] * (spline["scale_base"] * torch.nn.functional.silu(xt[0, :, 0]) + spline["scale_sp"] * sp_val)
    return val.numpy().reshape(np.shape(x))


@torch.no_grad()
def contributing_edges(model: GatedKAN, x_scaled: torch.Tensor, estimator: str = "threshold", n: int = N_SAMPLES):
    """The contributing edges of a single-member model (the trace of model_edge_roles) with
    their curves over the ranges their sources take on the model-scaled inputs x_scaled
    (N, n_0); and the selected exit."""
    if model.M != 1:
        raise ValueError(f"a formula is exported from one member, the model has {model.M}")
    roles = model_edge_roles(model, estimator)[0]
    gates = trained_inference_gates(model, estimator)  # as the trace
    inputs = model.stage_inputs(x_scaled.to(model.alpha.dtype).unsqueeze(0), gates)
    z = model.split_edges(gates)
    K = model.spec.spline_order
    edges = []
    for k, stage in enumerate(model.stages):
        h = inputs[k][0].to(torch.float64)
        # a buffer and parameters (mypy sees Module attributes)
        grid, coef = cast(torch.Tensor, stage.grid), cast(torch.Tensor, stage.coef)
        scale_base, scale_sp = cast(torch.Tensor, stage.scale_base), cast(torch.Tensor, stage.scale_sp)
        for i, o in sorted(zip(*np.nonzero(roles.path[k] | roles.bias[k]), strict=True)):
            i, o = int(i), int(o)
            lo, hi = float(h[:, i].min()), float(h[:, i].max())
            spline = {
                "gate": float(z[k][0, i, o]), "scale_base": float(scale_base[0, i, o]),
                "scale_sp": float(scale_sp[0, i, o]),
                "order": K, "knots": grid[0, i].double().tolist(), "coef": coef[0, i, o].double().tolist(),
            }
            xs = np.linspace(lo, hi, n) if hi > lo else np.array([lo])
            edges.append(Edge(k, i, o, source_node(model, k, i), dest_node(model, k, o),
                              "path" if roles.path[k][i, o] else "bias",
                              lo, hi, xs, spline_activation(spline, xs), spline,
                              float(spline_activation(spline, h[:, i].numpy()).var())))
    return edges, roles.exit


# ------------------------------------------------------------------ composition


def evaluate(edges: Sequence[Edge], x_scaled: np.ndarray, n_out: int, exit_k: int) -> np.ndarray:
    """The composed formula on model-scaled inputs (N, n_0) -> scaled outputs (N, n_out):
    each node the sum of its contributing edges, symbolic fits or exact splines."""
    x_scaled = np.asarray(x_scaled, dtype=np.float64)
    values: dict[tuple, np.ndarray] = {("x", 0, j): x_scaled[:, j] for j in range(x_scaled.shape[1])}
    zero = np.zeros(len(x_scaled))
    for e in sorted(edges, key=lambda e: e.stage):  # sources come from earlier stages
        src = values.get(e.src, zero)
        values[e.dst] = values.get(e.dst, zero) + e.value(src)
    return np.stack([values.get(("y", exit_k, p), zero) for p in range(n_out)], axis=1)


def symbol_names(names: Sequence[str]) -> list[str]:
    out = []
    for j, name in enumerate(names):
        s = re.sub(r"\W+", "_", str(name)).strip("_") or f"x{j}"
        if s[0].isdigit():
            s = "x_" + s
        while s in out:
            s += "_"
        out.append(s)
    return out


def compose(edges: Sequence[Edge], symbols: Sequence[sp.Symbol], x_shift, x_scale, y_shift, y_scale,
            n_out: int, exit_k: int):
    """One sympy expression per output, in the raw inputs ``symbols``: inputs scaled as the
    model saw them, edges composed through the sums (forward connections and exit heads are
    just edges whose source or destination says so), the target scaling undone. Numeric edges
    appear as phi_k_i_o(...) functions implemented by their spline."""
    F = sp.Float
    values: dict[tuple, sp.Expr] = {("x", 0, j): (s - F(float(x_shift[j]))) / F(float(x_scale[j]))
                                    for j, s in enumerate(symbols)}
    for e in sorted(edges, key=lambda e: e.stage):
        src = values.get(e.src, sp.Integer(0))
        if e.numeric:
            term = _implemented(e)(src) if src.free_symbols else F(float(e.exact(np.array([float(src)]))[0]))
        else:
            term = e.fit.sympy(src)
        values[e.dst] = values.get(e.dst, sp.Integer(0)) + term
    return [values.get(("y", exit_k, p), sp.Integer(0)) * F(float(y_scale[p])) + F(float(y_shift[p]))
            for p in range(n_out)]


def _implemented(e: Edge):
    from sympy.utilities.lambdify import implemented_function

    return implemented_function(sp.Function(e.name), lambda v, e=e: e.exact(np.asarray(v, dtype=np.float64)))


def round_floats(expr: sp.Expr, digits: int = SIG_DIGITS) -> sp.Expr:
    """The expression with every float rounded to ``digits`` significant digits."""
    return expr.xreplace({f: sp.Float(float(f"{float(f):.{digits}g}"), digits) for f in expr.atoms(sp.Float)})


def simplify(expr: sp.Expr, full: bool = False) -> sp.Expr:
    """The expression expanded by sympy (products of sums multiplied out, inside functions
    too; exp(a + b) and log(a b) left whole), and with ``full`` also through sympy.simplify
    (slow: seconds for ten operations, minutes for large expressions, so off by default)."""
    expr = sp.expand(expr, power_exp=False, power_base=False, log=False)
    if full:
        try:
            expr = sp.simplify(expr)
        except Exception:  # simplify is a heuristic; keep the expanded form if it fails
            pass
    return expr


# ------------------------------------------------------------------ the export


@dataclass
class Formula:
    """A run's formula: the edges with their fits, one expression per output (raw units),
    and how it compares with the network."""

    edges: list[Edge]
    exit: int
    symbols: list[sp.Symbol]
    input_names: tuple
    output_names: tuple
    expressions: list[sp.Expr]  # composed, full precision
    simplified: list[sp.Expr]  # after simplify(), full precision
    printed: list[str]  # simplified, ``digits`` significant digits
    metrics: dict  # test RMSE of formula / printed formula / network, fidelity ...
    settings: dict
    digits: int = SIG_DIGITS

    def __str__(self) -> str:
        return "\n".join(f"{n} = {p}" for n, p in zip(self.output_names, self.printed, strict=True))

    def lambdified(self, which: str = "simplified") -> Callable:
        """f(x_raw (N, n_0)) -> (N, n_out) of the chosen expressions (or "printed"); a pandas
        DataFrame's columns are read by the input names (kanx.tables.by_name)."""
        exprs = {"expressions": self.expressions, "simplified": self.simplified}.get(which)
        if exprs is None:  # "printed": the same rounding (numeric edges keep their implementation)
            exprs = [round_floats(e, self.digits) for e in self.simplified]
        fns = [sp.lambdify(self.symbols, e, modules="numpy") for e in exprs]

        def call(x):
            x = np.asarray(by_name(x, self.input_names, "formula"), dtype=np.float64)
            cols = [x[:, j] for j in range(x.shape[1])]
            return np.stack([np.broadcast_to(np.asarray(f(*cols), dtype=np.float64), (len(x),)) for f in fns], axis=1)

        return call

    def edge_table(self) -> list[dict]:
        rows = []
        for e in self.edges:
            row = {"edge": e.name, "stage": e.stage, "input": e.i, "column": e.o,
                   "src": node_name(e.src, self.input_names),
                   "dst": node_name(e.dst, self.output_names), "role": e.role,
                   "forward": e.forward, "head": e.dst[0] == "y", "range": [e.lo, e.hi], "share": e.share}
            if e.constant:
                row.update(primitive="constant", r2=None, value=float(e.ys[0]))
            elif e.numeric:
                row.update(primitive="spline", r2=None, best_fit=e.fit.as_dict())
            else:
                row.update(primitive=e.fit.primitive, r2=e.fit.r2, fit=e.fit.as_dict(),
                           expression=str(round_floats(e.fit.sympy(sp.Symbol("x")))))
            if e.numeric:
                row["spline"] = e.spline
                row["table"] = {"x": e.xs[:: max(1, len(e.xs) // 40)].tolist(),
                                "y": e.ys[:: max(1, len(e.ys) // 40)].tolist()}
            rows.append(row)
        return rows

    def as_dict(self) -> dict:
        return {
            "exit": self.exit, "inputs": [s.name for s in self.symbols], "input_names": list(self.input_names),
            "outputs": list(self.output_names),
            "expression": dict(zip(self.output_names, self.printed, strict=True)),
            "expression_full_precision": {n: str(e) for n, e in zip(self.output_names, self.simplified, strict=True)},
            "latex": {n: sp.latex(round_floats(e, self.digits))
                      for n, e in zip(self.output_names, self.simplified, strict=True)},
            "digits": self.digits,
            "metrics": self.metrics, "settings": self.settings, "edges": self.edge_table(),
        }

    def report(self) -> str:
        lines = [f"exit {self.exit}, {len(self.edges)} contributing edge(s) "
                 f"({sum(e.numeric for e in self.edges)} kept numeric)", ""]
        lines.append(f"{'edge':<12} {'from':<10} {'to':<10} {'primitive':<10} {'R^2':>10}  fit")
        for row in self.edge_table():
            r2 = "" if row["r2"] is None else f"{row['r2']:.6f}"
            fit = (f"{row['value']:+.4g}" if row["primitive"] == "constant"
                   else row.get("expression", "spline table (numeric)"))
            lines.append(f"{row['edge']:<12} {row['src']:<10} {row['dst']:<10} {row['primitive']:<10} {r2:>10}  {fit}")
        lines += ["", str(self), ""]
        m = self.metrics
        if m.get("test_rmse_network") is not None:
            lines.append(f"test RMSE  formula {m['test_rmse_formula']:.4g}   printed formula "
                         f"{m['test_rmse_printed']:.4g}   network {m['test_rmse_network']:.4g}   (ratio "
                         f"{m['rmse_ratio']:.3g})")
        lines.append(f"formula vs network on the training inputs: RMSE {m['fidelity_rmse']:.3g} "
                     f"({m['fidelity_rel']:.3g} of std(y_train))")
        return "\n".join(lines)


def node_name(node: tuple, names: Sequence[str]) -> str:
    if node[0] == "y":
        return f"{names[node[2]] if node[2] < len(names) else 'y' + str(node[2])}@exit{node[1]}"
    if node[1] == 0:
        return str(names[node[2]]) if node[2] < len(names) else f"x{node[2]}"
    return f"h{node[1]}_{node[2]}"


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def _names(given: Sequence[str], table, prefix: str, n: int) -> tuple:
    """The names given, else a DataFrame's column names, else prefix0, prefix1, ..."""
    if given:
        return tuple(given)
    return tuple(map(str, table.columns)) if is_frame(table) else tuple(f"{prefix}{j}" for j in range(n))


@torch.no_grad()
def export(model: GatedKAN, scaling, x_train, y_train=None, x_test=None, y_test=None, input_names: Sequence[str] = (),
           output_names: Sequence[str] = (), estimator: str = "threshold",
           primitives: Sequence[str] = DEFAULT_PRIMITIVES,
           simplicity: float = SIMPLICITY, tolerance: float | None = None, n: int = N_SAMPLES,
           full_simplify: bool = False) -> Formula:
    """The formula of a single-member model. x_*/y_*: raw units (the scaling maps them as the
    model saw them), positional or pandas DataFrames read by input_names and output_names (a
    DataFrame x_train names the inputs when input_names is not given); y_train sets the
    tolerance's unit (std(y_train), else the target scale)."""
    check_options(primitives, simplicity, tolerance)
    n0, n_out = model.width[0], model.n_out
    input_names = _names(input_names, x_train, "x", n0)
    output_names = _names(output_names, y_train, "y", n_out)
    x_train, x_test = (by_name(x, input_names, "export", "inputs") for x in (x_train, x_test))
    y_train, y_test = (by_name(y, output_names, "export", "outputs") if is_frame(y) else y for y in (y_train, y_test))
    x_train = torch.as_tensor(np.asarray(x_train), dtype=torch.float64)
    xs_train = scaling.x(x_train)
    edges, exit_k = contributing_edges(model, xs_train, estimator, n)
    out_var = float(model.predict(xs_train.unsqueeze(0).to(model.alpha.dtype), estimator)[0].double().var(0).mean())
    for e in edges:
        e.share = e.variance / out_var if out_var > 0 else 1.0
        e.fits = ([Fit("constant", 1.0, 0, d=float(e.ys[0]))] if e.constant
                  else fit_curve(e.xs, e.ys, primitives, simplicity, e.share))

    y_scale = scaling.y_scale.double().reshape(-1).numpy() * np.ones(n_out)
    y_shift = scaling.y_shift.double().reshape(-1).numpy() * np.ones(n_out)
    xs_np = xs_train.numpy()

    def formula_raw(x_scaled):
        return evaluate(edges, x_scaled, n_out, exit_k) * y_scale + y_shift

    def network_raw(x_raw):
        scaled = scaling.x(torch.as_tensor(np.asarray(x_raw), dtype=torch.float64)).unsqueeze(0).to(model.alpha.dtype)
        return scaling.y_inverse(model.predict(scaled, estimator)[0].double()).numpy()

    net_train = network_raw(x_train)
    unit = float(np.asarray(y_train, dtype=np.float64).std()) if y_train is not None else float(np.mean(y_scale))
    unit = unit if unit > 0 else 1.0

    def fidelity() -> float:
        return _rmse(formula_raw(xs_np), net_train)

    if tolerance is not None:
        while fidelity() > tolerance * unit:
            candidates = [e for e in edges if not e.numeric and not e.constant]
            if not candidates:
                break
            trial = []
            for e in candidates:
                e.numeric = True
                trial.append((fidelity(), e.fit.r2, id(e), e))
                e.numeric = False
            min(trial, key=lambda t: (t[0], t[1]))[3].numeric = True

    names = symbol_names(input_names)
    symbols = [sp.Symbol(s, real=True) for s in names]
    x_shift = scaling.x_shift.double().reshape(-1).numpy() * np.ones(n0)
    x_scale = scaling.x_scale.double().reshape(-1).numpy() * np.ones(n0)
    expressions = compose(edges, symbols, x_shift, x_scale, y_shift, y_scale, n_out, exit_k)
    simplified = [simplify(e, full_simplify) for e in expressions]
    formula = Formula(edges, exit_k, symbols, input_names, output_names, expressions, simplified, [], {},
                      {"primitives": list(primitives), "simplicity": simplicity,
                       "r2_floor": R2_FLOOR, "tolerance": tolerance,
                       "tolerance_unit": "std(y_train)" if y_train is not None else "target scale",
                       "samples_per_edge": n, "gate_estimator": estimator,
                       "score": "log10(max((1 - R^2) * share, r2_floor)) + simplicity * complexity (least wins); "
                            "share = var(edge over the training inputs) / var(network output)",
                       "complexity": {p: COMPLEXITY[p] for p in primitives}, "sympy_simplify": full_simplify,
                       "printed_digits": f"least of {SIG_DIGITS}..12 whose expression is within {PRINT_RTOL} "
                                         "std(y_train) RMSE of the full one"})
    full = formula.lambdified("simplified")(x_train.numpy())
    # rounding expanded polynomials can cancel badly: print as many digits as needed
    for digits in range(SIG_DIGITS, 13):
        formula.digits = digits
        if _rmse(formula.lambdified("printed")(x_train.numpy()), full) <= PRINT_RTOL * unit:
            break
    formula.printed = [str(round_floats(e, formula.digits)) for e in simplified]
    m = {"fidelity_rmse": fidelity(), "fidelity_rel": fidelity() / unit, "edges": len(edges),
         "numeric_edges": sum(e.numeric for e in edges), "exit": exit_k}
    if x_test is not None and y_test is not None:
        x_test = np.asarray(x_test, dtype=np.float64)
        y_test = np.asarray(y_test, dtype=np.float64).reshape(len(x_test), -1)
        m["test_rmse_formula"] = _rmse(formula.lambdified("simplified")(x_test), y_test)
        m["test_rmse_printed"] = _rmse(formula.lambdified("printed")(x_test), y_test)
        m["test_rmse_network"] = _rmse(network_raw(x_test), y_test)
        m["rmse_ratio"] = m["test_rmse_formula"] / m["test_rmse_network"] if m["test_rmse_network"] > 0 else math.inf
    formula.metrics = m
    return formula
