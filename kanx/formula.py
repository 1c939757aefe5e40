"""From a pruned KAN to a formula: symbolic export of a trained run.

    python -m kanx.formula RUN_DIR [--tolerance T] [--simplicity L] [--primitives x,x^2,sin,...]
    kanx.load_run(RUN_DIR).formula()        # the same, as a Formula object

What it does. The inference path is traced exactly as for the contributing-edge count and
the drawing (kanx.kan.structure.model_edge_roles: deterministic gates, forward connections
on, the selected exit). The network's output at that exit is a sum over those edges: every
node is the sum of its contributing incoming edges, and an edge adds z * phi(x) of its
source node, phi(x) = scale_base silu(x) + scale_sp sum_c coef_c B_c(x) (KANLayer). Each
contributing edge's curve is sampled on a uniform grid over the range its source node takes
on the run's training inputs (the range the drawing plots) and fitted, under an affine map,
by every primitive of a library (fit_curve):

    y ~ c * f(a x + b) + d,   f in 0, x, x^2, x^3, x^4, 1/x, sqrt, log, exp, sin, tanh, abs,
                              and the general cubic and quartic polynomials.

(c, d) are the least-squares solution for each (a, b); (a, b) come from a grid search
refined by zooming in and by Levenberg-Marquardt (x and x^2, the cubic and the quartic are
solved exactly by least squares). The edge takes the primitive of least

    score = log10(max((1 - R^2) * share, 1e-6)) + simplicity * complexity    (simplicity = 0.5)

share = the edge's variance over the training inputs / the variance of the network's output:
(1 - R^2) * share is the variance the fit leaves unexplained, in units of the output's. Each
unit of complexity (COMPLEXITY below: 0 for the constant "0", 1 for x, 2 for x^2 and the
transcendental ones, ...) must buy a sqrt(10) ~ 3.2-fold smaller unexplained variance; below
1e-6 of the output's variance fits are not told apart. So an edge that matters little is
simplified further, down to its mean ("0" scores log10(share)), and one that matters must
fit well to earn a primitive rather than its mean. An edge whose source is constant (a
bias term) is its constant value.

The edges are composed in sympy through the network's sums, forward connections and the
selected exit head, with the inputs' scaling undone (x_scaled = (x - shift) / scale, by the
scaling saved with the model) and the target standardization undone (y = y_s * scale +
shift): one expression per output in the raw input variables, named as the dataset's
inputs. `tolerance` keeps the formula honest: while the RMSE between formula and network on
the training inputs exceeds tolerance * std(y_train), the symbolic edge whose return to its
exact spline lowers that RMSE most is kept numeric (phi_k_i_o in the expression, written as
a spline table), so the export stays within the tolerance of the network.

Output: a per-edge table (primitive, R^2), the formula (expanded by sympy, and with
--sympy-simplify also through sympy.simplify, which takes seconds to minutes; printed with 4
significant digits, more where rounding would move it by over 1e-3 std(y_train) on the
training inputs), its test RMSE next to the network's, and, in the run folder, formula.json,
formula.tex and formula.png (each edge's learned curve with its fit overlaid).
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sympy as sp
import torch

from kanx.cli import prog
from kanx.errors import ConfigError, report
from kanx.kan.network import GatedKAN
from kanx.kan.spline import bspline_basis
from kanx.kan.structure import dest_node, model_edge_roles, source_node, trained_inference_gates
from kanx.load import load_finished_run, rebuild_dataset

# ------------------------------------------------------------------ the library

R2_FLOOR = 1e-6  # 1 - R^2 below this counts as a perfect fit (the spline's own precision)
SIMPLICITY = 0.5  # log10 units of unexplained variance that one unit of complexity costs
N_SAMPLES = 201  # points per edge curve
SIG_DIGITS = 4  # least significant digits of the printed expression
PRINT_RTOL = 1e-3  # ... raised until it is within this RMSE (in std(y_train)) of the full-precision one

COMPLEXITY = {
    "0": 0, "x": 1, "x^2": 2, "x^3": 3, "x^4": 3, "1/x": 2, "sqrt": 2, "log": 2, "exp": 2,
    "sin": 2, "tanh": 3, "abs": 2, "cubic": 4, "quartic": 5,
}
DEFAULT_PRIMITIVES = tuple(COMPLEXITY)


def _finite_at_least_0(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def check_options(primitives: Sequence[str], simplicity: float, tolerance: float | None = None) -> None:
    """A ConfigError, one line naming the value and what is allowed, for options no formula is
    fitted with; checked before the run is read. A negative simplicity would reward complexity
    (the export then runs for many minutes), a negative or NaN tolerance silently means
    "every edge numeric" or "off"."""
    if not primitives:
        raise ConfigError(f"no primitives given; choose from {', '.join(COMPLEXITY)}")
    unknown = [p for p in primitives if p not in COMPLEXITY]
    if unknown:
        raise ConfigError(f"unknown primitive(s) {unknown}; choose from {', '.join(COMPLEXITY)}")
    if not _finite_at_least_0(simplicity):
        raise ConfigError(f"simplicity {simplicity!r} is out of range; expected a finite number >= 0, what one unit of complexity "
                          f"costs in the score (default {SIMPLICITY})")
    if tolerance is not None and not _finite_at_least_0(tolerance):
        raise ConfigError(f"tolerance {tolerance!r} is out of range; expected a finite number >= 0, in units of std(y_train) "
                          "(e.g. 0.1; 0 keeps every edge a spline), or leave it out to keep every edge symbolic")


def _recip(v):
    return 1.0 / v


# numpy and sympy forms of the primitives fitted by the (a, b) search.
_SEARCHED: dict[str, tuple[Callable, Callable]] = {
    "x^3": (lambda v: v * v * v, lambda s: s**3),
    "x^4": (lambda v: (v * v) * (v * v), lambda s: s**4),
    "1/x": (_recip, lambda s: 1 / s),
    "sqrt": (np.sqrt, sp.sqrt),
    "log": (np.log, sp.log),
    "exp": (np.exp, sp.exp),
    "sin": (np.sin, sp.sin),
    "tanh": (np.tanh, sp.tanh),
    "abs": (np.abs, sp.Abs),
}
# Where the primitive is defined: the argument a x + b must stay inside on the whole range.
_DOMAIN = {"1/x": "nonzero", "sqrt": "nonnegative", "log": "positive"}
# Primitives whose scale a is absorbed by c (f(a v) = g(a) f(v) (+ h(a))): only its sign is searched.
_SCALE_FREE = {"x^3", "x^4", "1/x", "sqrt", "log", "abs"}


@dataclass
class Fit:
    """One primitive fitted to a curve: y ~ c * f(a x + b) + d (poly: coefficients of x^0..x^n
    in ``poly``). r2 is the coefficient of determination on the fitted samples."""

    primitive: str
    r2: float
    complexity: int
    a: float = 1.0
    b: float = 0.0
    c: float = 0.0
    d: float = 0.0
    poly: tuple[float, ...] = ()
    score: float = math.inf

    def numpy(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.primitive in ("0", "constant"):
            return np.full_like(x, self.d)
        if self.poly:
            return np.polynomial.polynomial.polyval(x, self.poly)
        f = _SEARCHED[self.primitive][0] if self.primitive in _SEARCHED else (lambda v: v if self.primitive == "x" else v**2)
        with np.errstate(all="ignore"):
            return self.c * f(self.a * x + self.b) + self.d

    def sympy(self, s: sp.Expr) -> sp.Expr:
        F = sp.Float
        if self.primitive in ("0", "constant"):
            return F(self.d)
        if self.poly:
            return sum((F(p) * s**n for n, p in enumerate(self.poly)), sp.Integer(0))
        arg = (s if self.a == 1.0 else F(self.a) * s) + (F(self.b) if self.b else 0)
        f = {"x": lambda v: v, "x^2": lambda v: v**2}.get(self.primitive) or _SEARCHED[self.primitive][1]
        return F(self.c) * f(arg) + F(self.d)

    def as_dict(self) -> dict:
        out = {"primitive": self.primitive, "r2": self.r2, "complexity": self.complexity, "score": self.score}
        if self.poly:
            out["poly"] = list(self.poly)
        else:
            out.update(a=self.a, b=self.b, c=self.c, d=self.d)
        return out


def _score(r2: float, complexity: int, simplicity: float, weight: float = 1.0) -> float:
    return math.log10(max((1.0 - r2) * weight, R2_FLOOR)) + simplicity * complexity


def _closed_form(F: np.ndarray, y: np.ndarray):
    """Least-squares (c, d) and R^2 of y ~ c F + d for every row of F (..., n)."""
    yc = y - y.mean()
    Fc = F - F.mean(-1, keepdims=True)
    sff = (Fc * Fc).sum(-1)
    sfy = (Fc * yc).sum(-1)
    syy = float((yc * yc).sum())
    ok = sff > 1e-300 * max(syy, 1e-300)
    c = np.where(ok, sfy / np.where(ok, sff, 1.0), 0.0)
    r2 = np.where(ok, sfy**2 / np.where(ok, sff, 1.0) / syy, 0.0)
    d = y.mean() - c * F.mean(-1)
    return c, d, np.clip(r2, 0.0, 1.0)


def _poly_fit(name: str, x: np.ndarray, y: np.ndarray, u, mid: float, half: float) -> Fit:
    """x, x^2, cubic, quartic: exact least squares (in the centred coordinate u, then back to x)."""
    deg = {"x": 1, "x^2": 2, "cubic": 3, "quartic": 4}[name]
    coef_u = np.polynomial.polynomial.polyfit(u, y, deg)
    pred = np.polynomial.polynomial.polyval(u, coef_u)
    syy = float(((y - y.mean()) ** 2).sum())
    r2 = float(np.clip(1.0 - ((y - pred) ** 2).sum() / syy, 0.0, 1.0))
    # u = (x - mid) / half: the same polynomial in x.
    coef_x = np.polynomial.polynomial.Polynomial(coef_u)(np.polynomial.polynomial.Polynomial([-mid / half, 1.0 / half])).coef
    coef_x = np.pad(coef_x, (0, deg + 1 - len(coef_x)))
    if name == "x":
        return Fit(name, r2, COMPLEXITY[name], a=1.0, b=0.0, c=float(coef_x[1]), d=float(coef_x[0]))
    if name == "x^2":
        p0, p1, p2 = (float(v) for v in coef_x)
        if abs(p2) * half**2 > 1e-12 * (abs(p1) * half + abs(p0) + 1e-300):
            # p2 x^2 + p1 x + p0 = p2 (x + p1 / (2 p2))^2 + p0 - p1^2 / (4 p2)
            return Fit(name, r2, COMPLEXITY[name], a=1.0, b=p1 / (2 * p2), c=p2, d=p0 - p1**2 / (4 * p2))
        return Fit(name, r2, COMPLEXITY[name], poly=(p0, p1))  # degenerate: a straight line
    return Fit(name, r2, COMPLEXITY[name], poly=tuple(float(v) for v in coef_x))


def _domain_ok(name: str, arg: np.ndarray) -> np.ndarray:
    """(…, n) arguments -> (…) whether f is defined (and finite) on all of them."""
    kind = _DOMAIN.get(name)
    if kind == "nonzero":
        return (arg > 1e-3).all(-1) | (arg < -1e-3).all(-1)
    if kind == "nonnegative":
        return (arg >= 0).all(-1)
    if kind == "positive":
        return (arg > 1e-6).all(-1)
    return np.ones(arg.shape[:-1], dtype=bool)


def _search_fit(name: str, x: np.ndarray, y: np.ndarray, u: np.ndarray, mid: float, half: float) -> Fit:
    """c f(alpha (u - u0)) + d, u the range mapped to [-1, 1]: (c, d) in closed form for each
    (alpha, u0) of a coarse grid; the best few grid points (a periodic or saturating f has
    several local optima) are then zoomed in together, a 7 x 7 grid around each, the window
    shrinking 0.45-fold 7 times, and polished by _polish. Returns a, b in the original
    coordinate x."""
    f = _SEARCHED[name][0]
    scale_free = name in _SCALE_FREE
    log_alpha = np.array([0.0]) if scale_free else np.linspace(np.log(0.05), np.log(25.0), 40)
    u0 = np.array([0.0]) if name == "exp" else np.linspace(-4.0, 4.0, 81)

    def evaluate(sign: float, la: np.ndarray, c0: np.ndarray, every: int = 1):
        """R^2, c, d of every (log alpha, u0) pair (flat arrays)."""
        u_, y_ = u[::every], y[::every]
        arg = (sign * np.exp(la))[:, None] * (u_ - c0[:, None])  # (P, n)
        with np.errstate(all="ignore"):
            F = f(arg)
        ok = _domain_ok(name, arg) & np.isfinite(F).all(-1)
        c, d, r2 = _closed_form(np.where(ok[:, None], F, 0.0), y_)
        return np.where(ok & np.isfinite(r2), r2, -1.0), c, d

    best = (-1.0, None)
    LA, U0 = (g.ravel() for g in np.meshgrid(log_alpha, u0, indexing="ij"))
    step = np.array([0.0 if scale_free else log_alpha[1] - log_alpha[0], 0.0 if len(u0) == 1 else u0[1] - u0[0]])
    offsets = np.stack(np.meshgrid(np.linspace(-1, 1, 7), np.linspace(-1, 1, 7), indexing="ij"), -1).reshape(-1, 2)  # (49, 2)
    for sign in (1.0, -1.0):
        r2, _, _ = evaluate(sign, LA, U0, every=max(1, len(u) // 50))  # coarse: on ~50 of the samples
        top = np.argsort(-r2)[:4]
        centres = np.stack([LA[top], U0[top]], -1)  # (S, 2)
        h = step.copy()
        for _ in range(7):
            pts = (centres[:, None, :] + offsets[None] * h).reshape(-1, 2)  # the centre is one of them
            r2, c, d = evaluate(sign, pts[:, 0], pts[:, 1])
            j = r2.reshape(len(centres), -1).argmax(-1) + np.arange(len(centres)) * len(offsets)
            centres = pts[j]
            h = h * 0.45
        k = int(j[np.argmax(r2[j])])
        if r2[k] > best[0]:
            best = (float(r2[k]), (sign, float(pts[k, 0]), float(pts[k, 1]), float(c[k]), float(d[k])))
    r2, p = best
    if p is None:  # never defined on this range
        return Fit(name, 0.0, COMPLEXITY[name], c=0.0, d=float(y.mean()))
    sign, la, c0, c, d = p
    alpha = sign * math.exp(la)
    r2, alpha, beta, c, d = _polish(name, u, y, r2, alpha, -alpha * c0, c, d)
    # alpha u + beta with u = (x - mid) / half  ->  a x + b
    a, b = alpha / half, beta - alpha * mid / half
    return Fit(name, float(r2), COMPLEXITY[name], a=a, b=b, c=c, d=d)


def _polish(name: str, u: np.ndarray, y: np.ndarray, r2: float, alpha: float, beta: float, c: float, d: float, steps: int = 30):
    """Levenberg-Marquardt on (alpha, beta, c, d) of c f(alpha u + beta) + d from the grid's
    best point (the grid leaves flat ridges, e.g. sin over a fraction of a period, where alpha
    and c trade off); derivatives in alpha, beta by central differences. Keeps the start if
    nothing better is found."""
    f = _SEARCHED[name][0]
    syy = float(((y - y.mean()) ** 2).sum())

    def resid(q):
        arg = q[0] * u + q[1]
        with np.errstate(all="ignore"):
            v = f(arg)
        if not (_domain_ok(name, arg[None])[0] and np.isfinite(v).all()):
            return None, None
        return q[2] * v + q[3] - y, v

    q = np.array([alpha, beta, c, d], dtype=np.float64)
    r, v = resid(q)
    if r is None:
        return r2, alpha, beta, c, d
    cost, lam = float(r @ r), 1e-3
    for _ in range(steps):
        h = 1e-6 * max(1.0, abs(q[0]), abs(q[1]))
        J = np.empty((len(u), 4))
        for j in (0, 1):
            e = np.zeros(4)
            e[j] = h
            rp, _ = resid(q + e)
            rm, _ = resid(q - e)
            if rp is None or rm is None:
                return r2, alpha, beta, c, d
            J[:, j] = (rp - rm) / (2 * h)
        J[:, 2], J[:, 3] = v, 1.0
        A, g = J.T @ J, J.T @ r
        improved = False
        for _ in range(8):
            try:
                step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
            except np.linalg.LinAlgError:
                break
            r_new, v_new = resid(q + step)
            if r_new is not None and float(r_new @ r_new) < cost:
                q, r, v, cost, lam, improved = q + step, r_new, v_new, float(r_new @ r_new), lam / 3, True
                break
            lam *= 4
        if not improved or cost <= 1e-30:
            break
    new_r2 = 1.0 - cost / syy
    if new_r2 > r2:
        return float(new_r2), *(float(t) for t in q)
    return r2, alpha, beta, c, d


def fit_curve(x, y, primitives: Sequence[str] = DEFAULT_PRIMITIVES, simplicity: float = SIMPLICITY, weight: float = 1.0) -> list[Fit]:
    """Fit samples y(x) by every primitive under an affine map, c f(a x + b) + d; the fits
    sorted by score (best first),

        score = log10(max((1 - R^2) * weight, R2_FLOOR)) + simplicity * complexity,

    ``weight`` the curve's share of the variance of what it feeds (1: the curve alone; export()
    passes each edge's share of the output's variance, so that an edge that matters little
    is simplified further, down to the constant "0", and one that matters must fit better)."""
    check_options(primitives, simplicity)
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    lo, hi = float(x.min()), float(x.max())
    mid, half = (lo + hi) / 2, max((hi - lo) / 2, 1e-12)
    u = (x - mid) / half
    spread = float(y.std())
    if spread <= 1e-12 * max(1.0, abs(float(y.mean()))):  # a flat curve: the constant is exact
        return [Fit("0", 1.0, 0, d=float(y.mean()), score=_score(1.0, 0, simplicity, weight))]
    fits = []
    for name in primitives:
        if name == "0":
            fit = Fit("0", 0.0, 0, d=float(y.mean()))
        elif name in ("x", "x^2", "cubic", "quartic"):
            fit = _poly_fit(name, x, y, u, mid, half)
        else:
            fit = _search_fit(name, x, y, u, mid, half)
        fit.score = _score(fit.r2, fit.complexity, simplicity, weight)
        fits.append(fit)
    return sorted(fits, key=lambda f: (f.score, f.complexity))


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
        for i, o in sorted(zip(*np.nonzero(roles.path[k] | roles.bias[k]), strict=True)):
            i, o = int(i), int(o)
            lo, hi = float(h[:, i].min()), float(h[:, i].max())
            spline = {
                "gate": float(z[k][0, i, o]), "scale_base": float(stage.scale_base[0, i, o]), "scale_sp": float(stage.scale_sp[0, i, o]),
                "order": K, "knots": stage.grid[0, i].double().tolist(), "coef": stage.coef[0, i, o].double().tolist(),
            }
            xs = np.linspace(lo, hi, n) if hi > lo else np.array([lo])
            edges.append(Edge(k, i, o, source_node(model, k, i), dest_node(model, k, o), "path" if roles.path[k][i, o] else "bias",
                              lo, hi, xs, spline_activation(spline, xs), spline, float(spline_activation(spline, h[:, i].numpy()).var())))
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


def _symbol_names(names: Sequence[str]) -> list[str]:
    out = []
    for j, name in enumerate(names):
        s = re.sub(r"\W+", "_", str(name)).strip("_") or f"x{j}"
        if s[0].isdigit():
            s = "x_" + s
        while s in out:
            s += "_"
        out.append(s)
    return out


def compose(edges: Sequence[Edge], symbols: Sequence[sp.Symbol], x_shift, x_scale, y_shift, y_scale, n_out: int, exit_k: int):
    """One sympy expression per output, in the raw inputs ``symbols``: inputs scaled as the
    model saw them, edges composed through the sums (forward connections and exit heads are
    just edges whose source or destination says so), the target scaling undone. Numeric edges
    appear as phi_k_i_o(...) functions implemented by their spline."""
    F = sp.Float
    values: dict[tuple, sp.Expr] = {("x", 0, j): (s - F(float(x_shift[j]))) / F(float(x_scale[j])) for j, s in enumerate(symbols)}
    for e in sorted(edges, key=lambda e: e.stage):
        src = values.get(e.src, sp.Integer(0))
        if e.numeric:
            term = _implemented(e)(src) if src.free_symbols else F(float(e.exact(np.array([float(src)]))[0]))
        else:
            term = e.fit.sympy(src)
        values[e.dst] = values.get(e.dst, sp.Integer(0)) + term
    return [values.get(("y", exit_k, p), sp.Integer(0)) * F(float(y_scale[p])) + F(float(y_shift[p])) for p in range(n_out)]


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
        """f(x_raw (N, n_0)) -> (N, n_out) of the chosen expressions (or "printed")."""
        exprs = {"expressions": self.expressions, "simplified": self.simplified}.get(which)
        if exprs is None:  # "printed": the same rounding (numeric edges keep their implementation)
            exprs = [round_floats(e, self.digits) for e in self.simplified]
        fns = [sp.lambdify(self.symbols, e, modules="numpy") for e in exprs]

        def call(x):
            x = np.asarray(x, dtype=np.float64)
            cols = [x[:, j] for j in range(x.shape[1])]
            return np.stack([np.broadcast_to(np.asarray(f(*cols), dtype=np.float64), (len(x),)) for f in fns], axis=1)

        return call

    def edge_table(self) -> list[dict]:
        rows = []
        for e in self.edges:
            row = {"edge": e.name, "stage": e.stage, "input": e.i, "column": e.o, "src": _node_name(e.src, self.input_names),
                   "dst": _node_name(e.dst, self.output_names), "role": e.role, "forward": e.forward, "head": e.dst[0] == "y",
                   "range": [e.lo, e.hi], "share": e.share}
            if e.constant:
                row.update(primitive="constant", r2=None, value=float(e.ys[0]))
            elif e.numeric:
                row.update(primitive="spline", r2=None, best_fit=e.fit.as_dict())
            else:
                row.update(primitive=e.fit.primitive, r2=e.fit.r2, fit=e.fit.as_dict(), expression=str(round_floats(e.fit.sympy(sp.Symbol("x")))))
            if e.numeric:
                row["spline"] = e.spline
                row["table"] = {"x": e.xs[:: max(1, len(e.xs) // 40)].tolist(), "y": e.ys[:: max(1, len(e.ys) // 40)].tolist()}
            rows.append(row)
        return rows

    def as_dict(self) -> dict:
        return {
            "exit": self.exit, "inputs": [s.name for s in self.symbols], "input_names": list(self.input_names),
            "outputs": list(self.output_names),
            "expression": dict(zip(self.output_names, self.printed, strict=True)),
            "expression_full_precision": {n: str(e) for n, e in zip(self.output_names, self.simplified, strict=True)},
            "latex": {n: sp.latex(round_floats(e, self.digits)) for n, e in zip(self.output_names, self.simplified, strict=True)},
            "digits": self.digits,
            "metrics": self.metrics, "settings": self.settings, "edges": self.edge_table(),
        }

    def report(self) -> str:
        lines = [f"exit {self.exit}, {len(self.edges)} contributing edge(s) "
                 f"({sum(e.numeric for e in self.edges)} kept numeric)", ""]
        lines.append(f"{'edge':<12} {'from':<10} {'to':<10} {'primitive':<10} {'R^2':>10}  fit")
        for row in self.edge_table():
            r2 = "" if row["r2"] is None else f"{row['r2']:.6f}"
            fit = f"{row['value']:+.4g}" if row["primitive"] == "constant" else row.get("expression", "spline table (numeric)")
            lines.append(f"{row['edge']:<12} {row['src']:<10} {row['dst']:<10} {row['primitive']:<10} {r2:>10}  {fit}")
        lines += ["", str(self), ""]
        m = self.metrics
        if m.get("test_rmse_network") is not None:
            lines.append(f"test RMSE  formula {m['test_rmse_formula']:.4g}   printed formula {m['test_rmse_printed']:.4g}   "
                         f"network {m['test_rmse_network']:.4g}   (ratio {m['rmse_ratio']:.3g})")
        lines.append(f"formula vs network on the training inputs: RMSE {m['fidelity_rmse']:.3g} "
                     f"({m['fidelity_rel']:.3g} of std(y_train))")
        return "\n".join(lines)


def _node_name(node: tuple, names: Sequence[str]) -> str:
    if node[0] == "y":
        return f"{names[node[2]] if node[2] < len(names) else 'y' + str(node[2])}@exit{node[1]}"
    if node[1] == 0:
        return str(names[node[2]]) if node[2] < len(names) else f"x{node[2]}"
    return f"h{node[1]}_{node[2]}"


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


@torch.no_grad()
def export(model: GatedKAN, scaling, x_train, y_train=None, x_test=None, y_test=None, input_names: Sequence[str] = (),
           output_names: Sequence[str] = (), estimator: str = "threshold", primitives: Sequence[str] = DEFAULT_PRIMITIVES,
           simplicity: float = SIMPLICITY, tolerance: float | None = None, n: int = N_SAMPLES, full_simplify: bool = False) -> Formula:
    """The formula of a single-member model. x_*/y_*: raw units (the scaling maps them as the
    model saw them); y_train sets the tolerance's unit (std(y_train), else the target scale)."""
    check_options(primitives, simplicity, tolerance)
    n0, n_out = model.width[0], model.n_out
    input_names = tuple(input_names) or tuple(f"x{j}" for j in range(n0))
    output_names = tuple(output_names) or tuple(f"y{p}" for p in range(n_out))
    x_train = torch.as_tensor(np.asarray(x_train), dtype=torch.float64)
    xs_train = scaling.x(x_train)
    edges, exit_k = contributing_edges(model, xs_train, estimator, n)
    out_var = float(model.predict(xs_train.unsqueeze(0).to(model.alpha.dtype), estimator)[0].double().var(0).mean())
    for e in edges:
        e.share = e.variance / out_var if out_var > 0 else 1.0
        e.fits = [Fit("constant", 1.0, 0, d=float(e.ys[0]))] if e.constant else fit_curve(e.xs, e.ys, primitives, simplicity, e.share)

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

    names = _symbol_names(input_names)
    symbols = [sp.Symbol(s, real=True) for s in names]
    x_shift = scaling.x_shift.double().reshape(-1).numpy() * np.ones(n0)
    x_scale = scaling.x_scale.double().reshape(-1).numpy() * np.ones(n0)
    expressions = compose(edges, symbols, x_shift, x_scale, y_shift, y_scale, n_out, exit_k)
    simplified = [simplify(e, full_simplify) for e in expressions]
    formula = Formula(edges, exit_k, symbols, input_names, output_names, expressions, simplified, [], {},
                      {"primitives": list(primitives), "simplicity": simplicity, "r2_floor": R2_FLOOR, "tolerance": tolerance,
                       "tolerance_unit": "std(y_train)" if y_train is not None else "target scale", "samples_per_edge": n,
                       "gate_estimator": estimator,
                       "score": "log10(max((1 - R^2) * share, r2_floor)) + simplicity * complexity (least wins); "
                            "share = var(edge over the training inputs) / var(network output)",
                       "complexity": {p: COMPLEXITY[p] for p in primitives}, "sympy_simplify": full_simplify,
                       "printed_digits": f"least of {SIG_DIGITS}..12 whose expression is within {PRINT_RTOL} std(y_train) RMSE of the full one"})
    full = formula.lambdified("simplified")(x_train.numpy())
    for digits in range(SIG_DIGITS, 13):  # rounding expanded polynomials can cancel badly: print as many digits as needed
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


# ------------------------------------------------------------------ runs and files


def formula_of_run(run, **options) -> Formula:
    """export() of a TrainedRun (kanx.load_run) on its rebuilt training and test data."""
    check_options(options.get("primitives", DEFAULT_PRIMITIVES), options.get("simplicity", SIMPLICITY), options.get("tolerance"))
    ds = rebuild_dataset(run)
    f = export(run.model, run.scaling, ds.x_train, ds.y_train, ds.x_test, ds.y_test, run.input_names or ds.input_names,
               run.output_names or ds.output_names, run.gate_estimator, **options)
    rec = (run.record.get("metrics") or {}).get("test_rmse")
    f.metrics["record_test_rmse"] = rec
    if ds.dynamical:
        f.metrics["note"] = "one-step test RMSE (the record's test_rmse is the rollout RMSE)"
    return f


def to_latex(f: Formula) -> str:
    lines = ["% kanx.formula: symbolic export (python -m kanx.formula RUN_DIR)", "\\begin{align}"]
    eqs = [f"{sp.latex(sp.Symbol(_symbol_names([n])[0]))} &= {sp.latex(round_floats(e, f.digits))}" for n, e in zip(f.output_names, f.simplified, strict=True)]
    lines += [" \\\\\n".join(eqs), "\\end{align}", "", "\\begin{tabular}{llllr}", "edge & from & to & primitive & $R^2$ \\\\ \\hline"]
    for row in f.edge_table():
        r2 = "" if row["r2"] is None else f"{row['r2']:.6f}"
        lines.append(f"\\texttt{{{row['edge'].replace('_', chr(92) + '_')}}} & {row['src'].replace('_', chr(92) + '_')} & "
                     f"{row['dst'].replace('_', chr(92) + '_')} & {row['primitive'].replace('^', chr(92) + '^{}')} & {r2} \\\\")
    lines.append("\\end{tabular}")
    m = f.metrics
    if m.get("test_rmse_network") is not None:
        lines += ["", f"% test RMSE: formula {m['test_rmse_formula']:.6g}, network {m['test_rmse_network']:.6g}"]
    for row in f.edge_table():
        if "table" in row:
            lines += ["", f"% {row['edge']} kept numeric: spline table (x, z*phi(x))", "\\begin{tabular}{rr}", "$x$ & $\\phi(x)$ \\\\ \\hline"]
            lines += [f"{a:.5g} & {b:.5g} \\\\" for a, b in zip(row["table"]["x"], row["table"]["y"], strict=True)]
            lines.append("\\end{tabular}")
    return "\n".join(lines) + "\n"


def figure(f: Formula, ncols: int = 4):
    """Each contributing edge's learned curve z*phi(x) with its fitted primitive overlaid."""
    from matplotlib.figure import Figure

    edges = f.edges
    ncols = max(1, min(ncols, len(edges)))
    nrows = max(1, -(-len(edges) // ncols))
    fig = Figure(figsize=(3.1 * ncols, 2.5 * nrows + 0.9))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax in axes.ravel()[len(edges):]:
        ax.set_axis_off()
    for ax, e in zip(axes.ravel(), edges, strict=False):
        src, dst = _node_name(e.src, f.input_names), _node_name(e.dst, f.output_names)
        color = "#e66100" if e.forward else "#1f5fbf" if e.dst[0] == "y" else "#2b2b2b"
        if e.constant:
            ax.axhline(e.ys[0], color=color)
            ax.set_title(f"{src} → {dst}\nconstant {e.ys[0]:+.4g} (bias)", fontsize=8)
            continue
        ax.plot(e.xs, e.ys, color=color, lw=2.2, label="learned z·φ")
        fit = e.fit
        label = "spline (numeric)" if e.numeric else f"{fit.primitive}"
        ax.plot(e.xs, fit.numpy(e.xs), color="black", ls="--", lw=1.1, label=f"fit: {fit.primitive}")
        r2 = f"R²={fit.r2:.5f}"
        ax.set_title(f"{src} → {dst}: {label}\n{r2}" + (" (kept numeric)" if e.numeric else ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, frameon=False)
    m = f.metrics
    head = f"exit {f.exit}: " + "; ".join(f"{n} = {p}" for n, p in zip(f.output_names, f.printed, strict=True))
    if len(head) > 150:
        head = head[:147] + "..."
    if m.get("test_rmse_network") is not None:
        head += f"\ntest RMSE formula {m['test_rmse_formula']:.3g} vs network {m['test_rmse_network']:.3g}"
    fig.suptitle(head, fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def write(f: Formula, out_dir: str | Path, figure_formats: Sequence[str] = ("png",)) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / "formula.json", out_dir / "formula.tex"]
    paths[0].write_text(json.dumps(f.as_dict(), indent=1, default=float) + "\n")
    paths[1].write_text(to_latex(f))
    if figure_formats:
        fig = figure(f)
        for fmt in figure_formats:
            path = out_dir / f"formula.{fmt}"
            fig.savefig(path, dpi=150, format=fmt, facecolor="white")
            paths.append(path)
    return paths


PROG = "kanx.formula"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog("kanx.formula"), description="Symbolic export of a trained run: one formula from its contributing edges.")
    p.add_argument("run_dir", help="a finished run's directory (record.json, done, model.pt)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="keep the formula within this RMSE of the network on the training inputs, in units of std(y_train): "
                        "edges are kept numeric (spline tables) until it is; a number >= 0 (default: off, every edge symbolic)")
    p.add_argument("--simplicity", type=float, default=SIMPLICITY, help=f"complexity penalty of the score, a number >= 0 (default {SIMPLICITY})")
    p.add_argument("--primitives", default=",".join(DEFAULT_PRIMITIVES), help="comma-separated library (default: all)")
    p.add_argument("--sympy-simplify", action="store_true", help="also pass the expanded expression through sympy.simplify (slow)")
    p.add_argument("--out", help="folder for formula.json/.tex/.png (default: RUN_DIR)")
    p.add_argument("--no-figure", action="store_true", help="skip formula.png")
    args = p.parse_args(argv)
    primitives = [s.strip() for s in args.primitives.split(",") if s.strip()]
    try:
        check_options(primitives, args.simplicity, args.tolerance)
        run = load_finished_run(args.run_dir)  # as kanx.draw reads it
    except ConfigError as e:
        return report(PROG, e)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            f = formula_of_run(run, primitives=primitives, simplicity=args.simplicity, tolerance=args.tolerance,
                               full_simplify=args.sympy_simplify)
    except (ValueError, OSError) as e:  # data that cannot be rebuilt or do not match
        return report(PROG, e if isinstance(e, ConfigError) else f"{type(e).__name__}: {e}")
    print(f.report())
    for path in write(f, args.out or args.run_dir, () if args.no_figure else ("png",)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
