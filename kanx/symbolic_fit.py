"""The primitive library of the symbolic export (kanx.symbolic): one edge's sampled curve fitted,
under an affine map, by every primitive (fit_curve):

    y ~ c * f(a x + b) + d,   f in 0, x, x^2, x^3, x^4, 1/x, sqrt, log, exp, sin, tanh, abs,
                              and the general cubic and quartic polynomials.

(c, d) are the least-squares solution for each (a, b); (a, b) come from a grid search
refined by zooming in and by Levenberg-Marquardt (x and x^2, the cubic and the quartic are
solved exactly by least squares). The fits are ranked by

    score = log10(max((1 - R^2) * share, 1e-6)) + simplicity * complexity    (simplicity = 0.5)

share = the edge's variance over the training inputs / the variance of the network's output:
(1 - R^2) * share is the variance the fit leaves unexplained, in units of the output's. Each
unit of complexity (COMPLEXITY below: 0 for the constant "0", 1 for x, 2 for x^2 and the
transcendental ones, ...) must buy a sqrt(10) ~ 3.2-fold smaller unexplained variance; below
1e-6 of the output's variance fits are not told apart. So an edge that matters little is
simplified further, down to its mean ("0" scores log10(share)), and one that matters must
fit well to earn a primitive rather than its mean.

NumPy and sympy only: it knows nothing of the network (kanx.symbolic) or of run folders
(kanx.formula, kanx.load).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import sympy as sp

from kanx.errors import ConfigError

# ------------------------------------------------------------------ the library

R2_FLOOR = 1e-6  # 1 - R^2 below this counts as a perfect fit (the spline's own precision)
SIMPLICITY = 0.5  # log10 units of unexplained variance that one unit of complexity costs

COMPLEXITY = {
    "0": 0, "x": 1, "x^2": 2, "x^3": 3, "x^4": 3, "1/x": 2, "sqrt": 2, "log": 2, "exp": 2,
    "sin": 2, "tanh": 3, "abs": 2, "cubic": 4, "quartic": 5,
}
DEFAULT_PRIMITIVES = tuple(COMPLEXITY)


def _finite_at_least_0(value) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
            and float(value) >= 0)


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
        raise ConfigError(f"simplicity {simplicity!r} is out of range; expected a finite number >= 0, what one unit of "
                          f"complexity costs in the score (default {SIMPLICITY})")
    if tolerance is not None and not _finite_at_least_0(tolerance):
        raise ConfigError(f"tolerance {tolerance!r} is out of range; expected a finite "
                          "number >= 0, in units of std(y_train) (e.g. 0.1; 0 keeps every "
                          "edge a spline), or leave it out to keep every edge symbolic")


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
        f = (_SEARCHED[self.primitive][0] if self.primitive in _SEARCHED
             else (lambda v: v if self.primitive == "x" else v**2))
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
    coef_x = np.polynomial.polynomial.Polynomial(coef_u)(
        np.polynomial.polynomial.Polynomial([-mid / half, 1.0 / half])).coef
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
        return np.asarray((arg > 1e-3).all(-1) | (arg < -1e-3).all(-1))
    if kind == "nonnegative":
        return np.asarray((arg >= 0).all(-1))
    if kind == "positive":
        return np.asarray((arg > 1e-6).all(-1))
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

    best: tuple[float, tuple[float, float, float, float, float] | None] = (-1.0, None)
    LA, U0 = (g.ravel() for g in np.meshgrid(log_alpha, u0, indexing="ij"))
    step = np.array([0.0 if scale_free else log_alpha[1] - log_alpha[0], 0.0 if len(u0) == 1 else u0[1] - u0[0]])
    # (49, 2)
    offsets = np.stack(np.meshgrid(np.linspace(-1, 1, 7), np.linspace(-1, 1, 7), indexing="ij"), -1).reshape(-1, 2)
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


def _polish(name: str, u: np.ndarray, y: np.ndarray, r2: float, alpha: float, beta: float, c: float,
            d: float, steps: int = 30):
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


def fit_curve(x, y, primitives: Sequence[str] = DEFAULT_PRIMITIVES, simplicity: float = SIMPLICITY,
              weight: float = 1.0) -> list[Fit]:
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
