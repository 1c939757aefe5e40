"""Function-approximation benchmarks: sin(x + y^2) (Fig. 1) and Nguyen F1-F10.

Formulas and domains are those of Methods, "Experimental details": F1-F8 are univariate on
x in [-1, 1] except F7 (x in [0, 2]) and F8 (x in [0, 4]); F9 on [-1, 1]^2; F10 on
[-pi, pi]^2; sin(x + y^2) on [-2, 2]^2. Points are drawn uniformly at random from the domain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kanx.data.dataset import Dataset, make_dataset


@dataclass(frozen=True)
class Problem:
    """A target function of one or two variables on a box."""

    formula: str
    f: Callable[..., np.ndarray]  # one array argument per input variable
    domain: tuple[tuple[float, float], ...]  # (low, high) per input variable


_UNIT = ((-1.0, 1.0),)
PROBLEMS: dict[str, Problem] = {
    "sin_xy2": Problem("z = sin(x + y^2)", lambda x, y: np.sin(x + y**2), ((-2.0, 2.0), (-2.0, 2.0))),
    "nguyen_f1": Problem("y = x^3 + x^2 + x", lambda x: x**3 + x**2 + x, _UNIT),
    "nguyen_f2": Problem("y = x^4 + x^3 + x^2 + x", lambda x: x**4 + x**3 + x**2 + x, _UNIT),
    "nguyen_f3": Problem("y = x^5 + x^4 + x^3 + x^2 + x", lambda x: x**5 + x**4 + x**3 + x**2 + x, _UNIT),
    "nguyen_f4": Problem(
        "y = x^6 + x^5 + x^4 + x^3 + x^2 + x", lambda x: x**6 + x**5 + x**4 + x**3 + x**2 + x, _UNIT
    ),
    "nguyen_f5": Problem("y = sin(x^2) cos(x) - 1", lambda x: np.sin(x**2) * np.cos(x) - 1.0, _UNIT),
    "nguyen_f6": Problem("y = sin(x) + sin(x + x^2)", lambda x: np.sin(x) + np.sin(x + x**2), _UNIT),
    "nguyen_f7": Problem("y = log(x + 1) + log(x^2 + 1)", lambda x: np.log(x + 1.0) + np.log(x**2 + 1.0),
                         ((0.0, 2.0),)),
    "nguyen_f8": Problem("y = sqrt(x)", lambda x: np.sqrt(x), ((0.0, 4.0),)),
    "nguyen_f9": Problem("z = sin(x) + sin(y^2)", lambda x, y: np.sin(x) + np.sin(y**2), ((-1.0, 1.0), (-1.0, 1.0))),
    "nguyen_f10": Problem("z = 2 sin(x) cos(y)", lambda x, y: 2.0 * np.sin(x) * np.cos(y),
                          ((-np.pi, np.pi), (-np.pi, np.pi))),
}


def sample(problem: Problem, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n points uniform on the problem's box: inputs (n, q) and targets (n, 1)."""
    low, high = np.array(problem.domain).T
    x = rng.uniform(low, high, size=(n, len(problem.domain)))
    return x, problem.f(*x.T)[:, None]


def add_distractors(x: np.ndarray, k: int, domain: tuple[float, float], rng: np.random.Generator) -> np.ndarray:
    """x (n, q) with k more columns, independent uniform noise on ``domain``: inputs the
    target does not depend on (issue #38's variable-selection study)."""
    return np.concatenate([x, rng.uniform(*domain, size=(x.shape[0], k))], axis=1) if k else x


def make_function_dataset(name: str, data_seed: int, n_train: int, n_test: int, distractors: int = 0) -> Dataset:
    """Train and test points drawn independently from the domain.

    Train and test come from two child streams of `data_seed`, so the test points do not
    change when n_train does. ``distractors``: k inputs appended after the true ones (named
    d1 ... dk), uniform on the first variable's range, drawn from two further child streams,
    so the true inputs and targets are those of the dataset without them.
    """
    problem = PROBLEMS[name]
    seeds = np.random.SeedSequence(data_seed).spawn(4 if distractors else 2)  # children 0, 1 as without distractors
    train_rng, test_rng = (np.random.default_rng(s) for s in seeds[:2])
    bivariate = len(problem.domain) == 2
    (x_train, y_train), (x_test, y_test) = sample(problem, n_train, train_rng), sample(problem, n_test, test_rng)
    names = ("x", "y") if bivariate else ("x",)
    provenance: dict[str, object] = {"formula": problem.formula, "domain": [list(b) for b in problem.domain]}
    if distractors:
        x_train = add_distractors(x_train, distractors, problem.domain[0], np.random.default_rng(seeds[2]))
        x_test = add_distractors(x_test, distractors, problem.domain[0], np.random.default_rng(seeds[3]))
        names = (*names, *(f"d{i + 1}" for i in range(distractors)))
        provenance["distractors"] = distractors
    return make_dataset(
        name,
        data_seed,
        train=(x_train, y_train),
        test=(x_test, y_test),
        input_names=names,
        output_names=("z",) if bivariate else ("y",),
        provenance=provenance,
    )
