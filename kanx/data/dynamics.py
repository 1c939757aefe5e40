"""Forecasting dynamical systems (Sec. "Forecasting dynamical systems"): the Ikeda map and
the three-species food chain, as one-step maps x_n -> x_{n+1}, and free-running rollouts.

Each dataset is one long trajectory from a seeded random initial condition; the first
`transient` samples are discarded so that the data lie on the attractor. The remaining
n_train + n_test + 1 states give n_train + n_test consecutive pairs, split in time order
(training first, test right after).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from kanx.data.dataset import Dataset, make_dataset
from kanx.errors import ConfigError

IKEDA_MU = 0.9
# Initial conditions: a box around the origin. All of it lies in the basin of the one
# (chaotic) attractor at mu = 0.9, so the transient only has to bring the orbit onto it.
IKEDA_BOX = ((-0.5, 0.5), (-0.5, 0.5))

# McCann & Yodzis (1994) parameters of Eq. (food); chaotic at K = 0.98.
K, XP, YP, XQ, YQ, N0, P0 = 0.98, 0.4, 2.009, 0.08, 2.876, 0.16129, 0.5
RK4_STEP = 0.1  # fixed RK4 step h; samples are taken every dt = a whole number of steps
ECOSYSTEM_BOX = ((0.6, 1.0), (0.15, 0.55), (0.3, 0.8))  # initial N, P, Q


# ----------------------------------------------------------------------------- Ikeda
def ikeda_map(state: np.ndarray, mu: float = IKEDA_MU) -> np.ndarray:
    """One step of the Ikeda map, Eq. (ikeda), for states of shape (..., 2) = (x, y).

    phi = 0.4 - 6 / (1 + x^2 + y^2); x' = 1 + mu (x cos phi - y sin phi);
    y' = mu (x sin phi + y cos phi).
    """
    # Contiguous copies: the data are generated one state at a time and a model is scored
    # against this same function on batches, and the chaotic rollout of the true map only
    # reproduces the data exactly if both take the same (vectorized) code path.
    x = np.ascontiguousarray(state[..., 0], dtype=np.float64)
    y = np.ascontiguousarray(state[..., 1], dtype=np.float64)
    phi = 0.4 - 6.0 / (1.0 + x * x + y * y)
    cos, sin = np.cos(phi), np.sin(phi)
    return np.stack([1.0 + mu * (x * cos - y * sin), mu * (x * sin + y * cos)], axis=-1)


def ikeda_trajectory(initial: np.ndarray, n_steps: int) -> np.ndarray:
    """States s_0 = initial, s_{k+1} = ikeda_map(s_k): shape (n_steps + 1, 2)."""
    out = np.empty((n_steps + 1, 2))
    state = np.asarray(initial, dtype=np.float64).reshape(1, 2)
    out[0] = state[0]
    for k in range(n_steps):
        state = ikeda_map(state)
        out[k + 1] = state[0]
    return out


# ------------------------------------------------------------------------ food chain
def food_chain_rhs(n, p, q):
    """Right-hand side of Eq. (food): (dN/dt, dP/dt, dQ/dt).

    Works on floats and on numpy arrays alike, with the same operations in the same order,
    so a scalar trajectory and a vectorized flow agree bit for bit.
    """
    n_sat = n / (n + N0)  # N / (N + N0)
    p_sat = p / (p + P0)  # P / (P + P0)
    dn = n * (1.0 - n / K) - XP * YP * n_sat * p
    dp = XP * p * (YP * n_sat - 1.0) - XQ * YQ * p_sat * q
    dq = XQ * q * (YQ * p_sat - 1.0)
    return dn, dp, dq


def rk4_step(n, p, q, h: float = RK4_STEP):
    """One classical fourth-order Runge-Kutta step of Eq. (food) (floats or arrays)."""
    k1 = food_chain_rhs(n, p, q)
    k2 = food_chain_rhs(n + 0.5 * h * k1[0], p + 0.5 * h * k1[1], q + 0.5 * h * k1[2])
    k3 = food_chain_rhs(n + 0.5 * h * k2[0], p + 0.5 * h * k2[1], q + 0.5 * h * k2[2])
    k4 = food_chain_rhs(n + h * k3[0], p + h * k3[1], q + h * k3[2])
    return tuple(
        s + h / 6.0 * (a + 2.0 * b + 2.0 * c + d)
        for s, a, b, c, d in zip((n, p, q), k1, k2, k3, k4, strict=True)
    )


def substeps(dt: float, h: float = RK4_STEP) -> int:
    """The number of RK4 steps per sample; dt must be a whole multiple of h."""
    steps = round(dt / h)
    if steps < 1 or abs(steps * h - dt) > 1e-9 * max(1.0, dt):
        raise ConfigError(
            f"dataset 'ecosystem': option dt={dt!r} must be a positive multiple of the RK4 step "
            f"h={h}; use e.g. the default dt=0.5"
        )
    return steps


def food_chain_flow(state: np.ndarray, dt: float = 0.5, h: float = RK4_STEP) -> np.ndarray:
    """The sampled flow map of Eq. (food), state(t) -> state(t + dt), for states (..., 3).

    This is the exact map the ecosystem data follow (same RK4 steps as the generator).
    """
    n, p, q = (np.ascontiguousarray(state[..., i], dtype=np.float64) for i in range(3))
    for _ in range(substeps(dt, h)):
        n, p, q = rk4_step(n, p, q, h)
    return np.stack([n, p, q], axis=-1)


def food_chain_trajectory(
    initial: np.ndarray, n_samples: int, transient: int, dt: float, threshold: float
) -> np.ndarray | None:
    """The n_samples states after `transient` discarded ones, sampled every dt: (n_samples, 3).

    Returns None when the top predator dies out: Q <= threshold at any kept sample.
    Integrated with Python floats: for a 3-variable state the per-call overhead of numpy
    would dominate (about 30x slower); the arithmetic is the same as `food_chain_flow`.
    """
    n, p, q = (float(v) for v in initial)
    steps = substeps(dt)
    out = np.empty((n_samples, 3))
    for i in range(transient + n_samples):
        if i >= transient:
            if q <= threshold:
                return None
            out[i - transient] = (n, p, q)
        for _ in range(steps):
            n, p, q = rk4_step(n, p, q)
    return out


# -------------------------------------------------------------------------- rollouts
def rollout_plan(name: str, n_test: int, horizon: int | None, n_rollouts: int | None) -> tuple[int, tuple[int, ...]]:
    """The rollout length and its evenly spaced start indices in the test segment.

    Default horizon: the whole test segment for one rollout, else n_test // n_rollouts;
    default n_rollouts: n_test // horizon. Either way the rollouts tile the segment (neither
    set: one rollout over all of it). Starts run evenly from 0 to n_test - horizon.
    """
    if n_rollouts is None:
        n_rollouts = 1 if horizon is None or horizon > n_test else max(1, n_test // horizon)
    if horizon is None:
        horizon = max(1, n_test // n_rollouts)
    last = n_test - horizon  # the latest start that still fits the horizon
    if horizon < 1 or last < 0:
        raise ConfigError(
            f"dataset {name!r}: option horizon={horizon} must be between 1 and n_test={n_test}; "
            f"lower it or leave it unset (whole test segment)"
        )
    if n_rollouts > last + 1:
        raise ConfigError(
            f"dataset {name!r}: option n_rollouts={n_rollouts} is more than the {last + 1} distinct "
            f"starts for horizon={horizon} in n_test={n_test} test states; lower n_rollouts or horizon"
        )
    if n_rollouts == 1:
        return horizon, (0,)
    return horizon, tuple(r * last // (n_rollouts - 1) for r in range(n_rollouts))


def free_run(predict: Callable[[torch.Tensor], torch.Tensor], start: torch.Tensor, horizon: int) -> torch.Tensor:
    """Iterate predict from `start` (M, R, q) for `horizon` steps: (M, R, horizon, q).

    Each prediction is fed back as the next input, cast to the start's dtype and device, so
    predict always sees tensors like the dataset's.
    """
    states, steps = start, []
    for _ in range(horizon):
        states = predict(states).to(start)
        steps.append(states)
    return torch.stack(steps, dim=2)


# --------------------------------------------------------------------------- datasets
def _one_step_pairs(
    name: str, data_seed: int, states: np.ndarray, n_train: int, rollouts: tuple[int, tuple[int, ...]],
    state_names: tuple[str, ...], provenance: dict,
) -> Dataset:
    """Consecutive pairs (s_k, s_{k+1}) of a trajectory, split in time order."""
    horizon, starts = rollouts
    x, y = states[:-1], states[1:]
    return make_dataset(
        name, data_seed,
        train=(x[:n_train], y[:n_train]),
        test=(x[n_train:], y[n_train:]),
        input_names=state_names,
        output_names=tuple(f"{s}_next" for s in state_names),
        dynamical=True, horizon=horizon, rollout_starts=starts, provenance=provenance,
    )


def make_ikeda(
    name: str, data_seed: int, n_train: int, n_test: int, transient: int, horizon: int | None, n_rollouts: int | None
) -> Dataset:
    """Ikeda map, Eq. (ikeda) with mu = 0.9: one trajectory from (x, y) uniform in IKEDA_BOX."""
    rollouts = rollout_plan(name, n_test, horizon, n_rollouts)  # checked before generating
    initial = np.random.default_rng(data_seed).uniform(*np.array(IKEDA_BOX).T)
    states = ikeda_trajectory(initial, transient + n_train + n_test)[transient:]
    return _one_step_pairs(
        name, data_seed, states, n_train, rollouts, ("x", "y"),
        {"initial_condition": initial.tolist(), "mu": IKEDA_MU},
    )


def surviving_trajectory(
    data_seed: int, n_samples: int, transient: int, dt: float, threshold: float, max_draws: int
) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(initial condition, kept states, draws used) of the first draw from ECOSYSTEM_BOX
    whose top predator survives, or None if all max_draws draws die out."""
    rng = np.random.default_rng(data_seed)
    for draw in range(1, max_draws + 1):
        initial = rng.uniform(*np.array(ECOSYSTEM_BOX).T)
        states = food_chain_trajectory(initial, n_samples, transient, dt, threshold)
        if states is not None:
            return initial, states, draw
    return None


def make_ecosystem(
    name: str, data_seed: int, n_train: int, n_test: int, transient: int, dt: float,
    extinction_threshold: float, max_draws: int, horizon: int | None, n_rollouts: int | None,
) -> Dataset:
    """Three-species food chain, Eq. (food), sampled every dt after RK4 integration (h = 0.1).

    Initial conditions are drawn uniformly from ECOSYSTEM_BOX. About two in three of them
    end on the predator-free cycle (Q -> 0) instead of the chaotic attractor; such a draw
    (Q <= extinction_threshold at a kept sample) is rejected and the next one is tried, up
    to max_draws in all.
    """
    rollouts = rollout_plan(name, n_test, horizon, n_rollouts)  # checked before generating
    substeps(dt)
    found = surviving_trajectory(data_seed, n_train + n_test + 1, transient, dt, extinction_threshold, max_draws)
    if found is None:
        raise ConfigError(
            f"dataset {name!r}: the top predator died out (Q <= extinction_threshold="
            f"{extinction_threshold}) in all {max_draws} trajectories drawn with data_seed={data_seed}; "
            f"raise max_draws or lower extinction_threshold"
        )
    initial, states, draws = found
    return _one_step_pairs(
        name, data_seed, states, n_train, rollouts, ("N", "P", "Q"),
        {"initial_condition": initial.tolist(), "draws": draws, "dt": dt, "rk4_step": RK4_STEP},
    )
