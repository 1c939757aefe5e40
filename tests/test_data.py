"""kanx.data: datasets against the paper's formulas and sizes, file checks, scalings, metrics."""

from __future__ import annotations

import dataclasses
import io
import math
import zipfile
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pandas as pd
import pytest
import torch

from kanx.data import DATASETS, dynamics, evaluate_members, fit_scaling, load_dataset, stack_scalings, tabular
from kanx.errors import ConfigError, DataError

# No test reads the user's KANX_DATA_DIR or cache, or touches the network (conftest.py).
pytestmark = pytest.mark.usefixtures("offline")
SHARED_DATA = Path(__file__).parents[1].parent / "shared" / "data"  # ../shared/data beside the repo
needs_shared = pytest.mark.skipif(
    not (SHARED_DATA / "concrete.csv").is_file() or not (SHARED_DATA / "superconductor.csv").is_file(),
    reason=f"the shared real-data folder {SHARED_DATA} is not there",
)

# name -> (n_train, n_test, q, p), from the hyperparameter table and Sec. "Real-world data".
SIZES = {
    "sin_xy2": (1024, 256, 2, 1),
    **{f"nguyen_f{i}": (1024, 256, 1, 1) for i in range(1, 9)},
    "nguyen_f9": (1024, 256, 2, 1),
    "nguyen_f10": (1024, 256, 2, 1),
    "ikeda": (6400, 1600, 2, 2),
    "ecosystem": (3000, 750, 3, 3),
    "concrete": (824, 206, 13, 1),
    "superconductor": (1000, 1000, 5, 1),
}
GENERATED = [n for n in SIZES if n not in ("concrete", "superconductor")]
REAL = [pytest.param(n, marks=needs_shared) for n in ("concrete", "superconductor")]


def load(name: str, seed: int = 0, **options):
    if name in ("concrete", "superconductor"):
        options.setdefault("data_dir", SHARED_DATA)
    return load_dataset(name, data_seed=seed, **options)


def same_data(a, b) -> bool:
    return all(torch.equal(getattr(a, s), getattr(b, s)) for s in ("x_train", "y_train", "x_test", "y_test"))


# ------------------------------------------------------------------------------ registry
def test_registry_names_in_paper_order():
    expected = ["sin_xy2", *(f"nguyen_f{i}" for i in range(1, 11)), "ikeda", "ecosystem", "concrete", "superconductor",
                "csv"]
    assert list(DATASETS) == expected
    assert DATASETS["nguyen_f7"].family == "nguyen" and DATASETS["ikeda"].family == "ikeda"


@pytest.mark.parametrize("name", [*GENERATED, *REAL])
def test_shapes_counts_and_seeding(name):
    n_train, n_test, q, p = SIZES[name]
    ds = load(name)
    assert (ds.x_train.shape, ds.y_train.shape, ds.x_test.shape, ds.y_test.shape) == (
        (n_train, q), (n_train, p), (n_test, q), (n_test, p))
    assert all(t.dtype == torch.float64 for t in (ds.x_train, ds.y_train, ds.x_test, ds.y_test))
    assert (ds.n_train, ds.n_test, ds.n_inputs, ds.n_outputs) == (n_train, n_test, q, p)
    assert len(ds.input_names) == q and len(ds.output_names) == p
    assert ds.family == ("nguyen" if name.startswith("nguyen") else name)
    assert ds.dynamical == (name in ("ikeda", "ecosystem"))
    assert ds.options["n_train"] == n_train and ds.data_seed == 0
    assert same_data(ds, load(name)), "the same data seed must give the same data"
    assert not same_data(ds, load(name, seed=1)), "another data seed must give other data"


def test_function_benchmarks_follow_the_paper():
    """Methods, "Experimental details": formulas and domains of sin(x + y^2) and Nguyen F1-F10."""
    u = (-1, 1)
    paper = {
        "sin_xy2": (lambda x, y: np.sin(x + y * y), [(-2, 2), (-2, 2)]),
        "nguyen_f1": (lambda x: x**3 + x**2 + x, [u]),
        "nguyen_f2": (lambda x: x**4 + x**3 + x**2 + x, [u]),
        "nguyen_f3": (lambda x: x**5 + x**4 + x**3 + x**2 + x, [u]),
        "nguyen_f4": (lambda x: x**6 + x**5 + x**4 + x**3 + x**2 + x, [u]),
        "nguyen_f5": (lambda x: np.sin(x**2) * np.cos(x) - 1, [u]),
        "nguyen_f6": (lambda x: np.sin(x) + np.sin(x + x**2), [u]),
        "nguyen_f7": (lambda x: np.log(x + 1) + np.log(x**2 + 1), [(0, 2)]),
        "nguyen_f8": (lambda x: np.sqrt(x), [(0, 4)]),
        "nguyen_f9": (lambda x, y: np.sin(x) + np.sin(y**2), [u, u]),
        "nguyen_f10": (lambda x, y: 2 * np.sin(x) * np.cos(y), [(-math.pi, math.pi)] * 2),
    }
    for name, (f, domain) in paper.items():
        ds = load(name)
        for x, y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
            x = x.numpy()
            np.testing.assert_allclose(y.numpy()[:, 0], f(*x.T), rtol=1e-12, atol=1e-12, err_msg=name)
            low, high = np.array(domain, dtype=float).T
            assert (x >= low).all() and (x <= high).all(), name
            # uniform draws: 1,024 points come within 2% of the width of both ends
            if len(x) == 1024:
                assert ((x.min(0) < low + 0.02 * (high - low)).all()
                        and (x.max(0) > high - 0.02 * (high - low)).all()), name


def test_sizes_are_options_and_test_points_do_not_depend_on_n_train():
    small = load("nguyen_f3", n_train=10, n_test=5)
    assert small.x_train.shape == (10, 1) and small.x_test.shape == (5, 1)
    assert torch.equal(small.x_test, load("nguyen_f3", n_train=20, n_test=5).x_test)


@pytest.mark.parametrize(
    "name, options, words",
    [
        ("nguyen_f11", {}, ["nguyen_f11", "nguyen_f10", "superconductor"]),
        ("ikeda", {"n_trian": 5}, ["n_trian", "n_train", "transient", "horizon"]),
        ("nguyen_f1", {"n_train": 0}, ["n_train=0", "integer >= 1", "1024"]),
        ("nguyen_f1", {"n_train": 10.5}, ["n_train=10.5", "integer"]),
        ("nguyen_f1", {"n_test": True}, ["n_test=True"]),
        ("ecosystem", {"dt": 0.25}, ["dt=0.25", "multiple", "0.1"]),
        ("ecosystem", {"dt": -1}, ["dt=-1", "> 0"]),
        ("ikeda", {"horizon": 1601}, ["horizon=1601", "n_test=1600"]),
        ("ikeda", {"n_rollouts": 2000}, ["n_rollouts=2000"]),
        ("csv", {"test_fraction": 1.5}, ["test_fraction=1.5", "between 0 and 1"]),
        ("csv", {"path": "x.csv"}, ["target=COLUMN"]),
        ("concrete", {"n_train": 1000}, ["1000 + 206", "1030"]),
    ],
)
def test_bad_name_or_option_is_a_config_error(name, options, words):
    if name == "concrete" and not (SHARED_DATA / "concrete.csv").is_file():
        pytest.skip(f"{SHARED_DATA} is not there")
    with pytest.raises(ConfigError) as err:
        load(name, **options)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_data_seed_must_be_a_non_negative_integer():
    for bad in (-1, 1.5, "0", None):
        with pytest.raises(ConfigError, match="data_seed"):
            load_dataset("nguyen_f1", data_seed=bad)


def test_data_dir_is_accepted_and_ignored_by_generated_datasets():
    ds = load_dataset("nguyen_f1", data_seed=0, data_dir="/nowhere")
    assert "data_dir" not in ds.options and same_data(ds, load("nguyen_f1"))


# ------------------------------------------------------------------------------ dynamics
def ikeda_paper(x, y, mu=0.9):
    """Eq. (ikeda), written out again here."""
    phi = 0.4 - 6 / (1 + x**2 + y**2)
    return 1 + mu * (x * np.cos(phi) - y * np.sin(phi)), mu * (x * np.sin(phi) + y * np.cos(phi))


def food_chain_paper(s):
    """Eq. (food) with McCann & Yodzis's parameters, written out again here."""
    K, xp, yp, xq, yq, N0, P0 = 0.98, 0.4, 2.009, 0.08, 2.876, 0.16129, 0.5
    N, P, Q = s[..., 0], s[..., 1], s[..., 2]
    return np.stack([
        N * (1 - N / K) - xp * yp * N * P / (N + N0),
        xp * P * (yp * N / (N + N0) - 1) - xq * yq * P * Q / (P + P0),
        xq * Q * (yq * P / (P + P0) - 1),
    ], axis=-1)


def consecutive(ds) -> bool:
    """The pairs are one trajectory in time order: x_{k+1} = y_k, test right after train."""
    x = torch.cat([ds.x_train, ds.x_test])
    y = torch.cat([ds.y_train, ds.y_test])
    return torch.equal(x[1:], y[:-1])


def test_ikeda_step_is_the_map_equation():
    ds = load("ikeda")
    assert consecutive(ds)
    for x, y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
        expected = np.stack(ikeda_paper(*x.numpy().T), axis=-1)
        np.testing.assert_allclose(y.numpy(), expected, rtol=0, atol=4e-16 * 4)
    # inside the attractor's bounding box (x in [-0.355, 1.709], y in [-2.214, 0.866] from
    # 500 long orbits); the expected spread of the data is checked by the rollout tests
    low, high = ds.x_train.amin(0), ds.x_train.amax(0)
    assert low[0] > -0.36 and high[0] < 1.71 and low[1] > -2.22 and high[1] < 0.87


def test_ecosystem_follows_the_food_chain_and_stays_on_the_attractor():
    ds = load("ecosystem")
    assert consecutive(ds)
    states = torch.cat([ds.x_train, ds.y_test[-1:]]).numpy()
    assert (states > 0).all() and (states < 1.1).all()
    assert states[:, 2].min() > 0.5, "the top predator survives (Q above the extinction threshold)"
    assert states[:, 0].max() < 0.98, "N stays below its carrying capacity K"
    # one sample (dt = 0.5) against an independent fine-step RK4 of Eq. (food)
    x, h = ds.x_test.numpy(), 0.5 / 50
    for _ in range(50):
        k1 = food_chain_paper(x)
        k2 = food_chain_paper(x + h / 2 * k1)
        k3 = food_chain_paper(x + h / 2 * k2)
        k4 = food_chain_paper(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    np.testing.assert_allclose(ds.y_test.numpy(), x, rtol=0, atol=1e-6)


def test_ecosystem_redraws_a_collapsing_trajectory_then_gives_up():
    ds = load("ecosystem", seed=0)
    assert ds.provenance["draws"] > 1
    first = np.random.default_rng(0).uniform(*np.array(dynamics.ECOSYSTEM_BOX).T)
    assert dynamics.food_chain_trajectory(first, 10, 3000, 0.5, 0.5) is None, "seed 0's first draw collapses"
    assert np.allclose(ds.provenance["initial_condition"], dynamics.surviving_trajectory(0, 10, 3000, 0.5, 0.5, 50)[0])
    # Q never exceeds ~1.04 on the attractor: a threshold of 2 rejects every draw
    with pytest.raises(ConfigError, match=r"died out .* all 3 trajectories .* raise max_draws"):
        load("ecosystem", extinction_threshold=2.0, max_draws=3)


def true_map(name):
    step = dynamics.ikeda_map if name == "ikeda" else dynamics.food_chain_flow
    return lambda x: torch.from_numpy(step(x.numpy()))


@pytest.mark.parametrize("name", ["ikeda", "ecosystem"])
def test_true_map_scores_zero(name):
    datasets = [load(name, seed=0), load(name, seed=1)]
    for metrics in evaluate_members(datasets, true_map(name)):
        ladder = metrics.pop("rollout_rmse")
        assert metrics == {"train_rmse": 0.0, "test_rmse": 0.0, "test_rmse_one_step": 0.0}
        assert set(ladder.values()) == {0.0}


@pytest.mark.parametrize("name", ["ikeda", "ecosystem"])
def test_the_rollout_ladder_holds_every_rung_and_agrees_with_the_plans_it_contains(name):
    from kanx.data.metrics import rollout_rungs

    ds = load(name, horizon=10)
    (metrics,) = evaluate_members([ds], mean_predictor([ds]))
    ladder = metrics["rollout_rmse"]
    assert list(ladder) == [str(h) for h in rollout_rungs(ds.n_test)] and ladder[str(ds.n_test)] is not None
    assert [int(h) for h in ladder][:4] == [1, 2, 5, 10] and int(list(ladder)[-1]) == ds.n_test
    # one-step rollouts tiling the segment
    assert ladder["1"] == pytest.approx(metrics["test_rmse_one_step"], rel=1e-12)
    assert ladder[str(ds.horizon)] == pytest.approx(metrics["test_rmse"], rel=1e-12)  # the configured plan is one rung
    whole = load(name)  # one rollout over the whole segment
    assert ladder[str(ds.n_test)] == pytest.approx(
        evaluate_members([whole], mean_predictor([whole]))[0]["test_rmse"], rel=1e-12)


def test_overlapping_rollouts_start_from_every_state_that_allows_the_horizon():
    from kanx.data.metrics import overlapping_rollout_rmse, rollout_rmse, rollout_rungs

    ds = load("ikeda", n_test=300)
    truth = true_map("ikeda")
    drifting = lambda x: truth(x) * 1.0001  # noqa: E731  (errors that grow along a rollout)
    x, y = ds.x_test[None], ds.y_test[None]
    rungs = rollout_rungs(ds.n_test)
    windows = overlapping_rollout_rmse(drifting, x, y, rungs)
    assert list(windows) == [1, 2, 5, 10, 20, 50, 100, 200, 300]
    for h in rungs:  # one shared free run, read at each horizon, is every window's own rollout
        each = rollout_rmse(drifting, x, y, h, range(ds.n_test - h + 1))
        assert windows[h].item() == pytest.approx(each.item(), rel=1e-12)
    (ladder,) = [m["rollout_rmse"] for m in evaluate_members([ds], drifting)]
    assert windows[1].item() == pytest.approx(ladder["1"], rel=1e-12)  # one step: the same states either way
    assert windows[300].item() == pytest.approx(ladder["300"], rel=1e-12)  # the whole segment has one window
    assert windows[20].item() != pytest.approx(ladder["20"], rel=1e-3)  # 281 windows, not the 15 that tile
    with pytest.raises(ValueError, match="from 1 to n_test=300"):
        overlapping_rollout_rmse(drifting, x, y, [0, 10])


def test_ikeda_rollout_from_a_nearby_state_saturates_at_the_attractor_spread():
    ds = load("ikeda")
    x_test = ds.x_test.clone()
    x_test[0] += 1e-6
    metrics = evaluate_members([dataclasses.replace(ds, x_test=x_test)], true_map("ikeda"))[0]
    level = math.sqrt(2 * ds.y_test.var(0, correction=0).mean().item())  # two independent points on the attractor
    assert metrics["test_rmse_one_step"] < 1e-6
    assert 0.8 < metrics["test_rmse"] < 1.0 and abs(metrics["test_rmse"] / level - 1) < 0.1


def mean_predictor(datasets):
    means = torch.stack([d.y_train.mean(0) for d in datasets])[:, None, :]  # (M, 1, p)
    return lambda x: means.expand(*x.shape[:-1], -1)


@pytest.mark.parametrize("name, options", [("ikeda", {}), ("ecosystem", {}), ("ikeda", {"n_rollouts": 4}),
                                           ("nguyen_f9", {})])
def test_training_mean_scores_test_spread_and_bias(name, options):
    ds = load(name, **options)
    metrics = evaluate_members([ds], mean_predictor([ds]))[0]
    starts, horizon = ds.rollout_starts or (0,), ds.horizon or ds.n_test
    targets = torch.cat([ds.y_test[s:s + horizon] for s in starts])
    bias = targets.mean(0) - ds.y_train.mean(0)
    expected = math.sqrt((targets.var(0, correction=0) + bias**2).mean().item())
    assert metrics["test_rmse"] == pytest.approx(expected, rel=1e-12)
    if ds.dynamical:  # the whole test segment at one step
        assert (metrics["test_rmse_one_step"]
                == pytest.approx(((ds.y_test - ds.y_train.mean(0)) ** 2).mean().sqrt().item(), rel=1e-12))


def test_rollouts_start_evenly_and_tile_the_test_segment():
    ds = load("ikeda", n_rollouts=4)
    assert ds.horizon == 400 and ds.rollout_starts == (0, 400, 800, 1200) and ds.options["horizon"] == 400
    ds = load("ikeda", n_rollouts=3, horizon=100)
    assert ds.rollout_starts == (0, 750, 1500)
    assert load("ikeda").rollout_starts == (0,) and load("ikeda").horizon == 1600
    ds = load("ikeda", horizon=10)  # n_rollouts unset: rollouts of 10 steps tile the segment
    assert ds.horizon == 10 and ds.rollout_starts == tuple(range(0, 1600, 10))
    ds = load("ikeda", horizon=7)  # 228 rollouts of 7: the last ends at most 6 states early
    assert len(ds.rollout_starts) == 1600 // 7 and ds.rollout_starts[-1] == 1600 - 7


def test_non_finite_predictions_give_nan_for_that_member_only():
    datasets = [load("ikeda", seed=0), load("ikeda", seed=1)]
    truth = true_map("ikeda")

    def second_member_blows_up(x):
        with np.errstate(invalid="ignore"):  # the inf fed back in
            out = truth(x)
        out[1] = float("inf")
        return out

    good, bad = evaluate_members(datasets, second_member_blows_up)
    good_ladder, bad_ladder = good.pop("rollout_rmse"), bad.pop("rollout_rmse")
    assert (good == {"train_rmse": 0.0, "test_rmse": 0.0, "test_rmse_one_step": 0.0}
            and set(good_ladder.values()) == {0.0})
    assert (all(math.isnan(v) for v in (*bad.values(), *bad_ladder.values()))
            and all(isinstance(v, float) for v in bad.values()))


def test_evaluate_members_scores_datasets_of_one_shape_and_rejects_others():
    # A mixed pack may hold Nguyen F1 and F2 (one shape), each member scored on its own data.
    f1, f2 = load("nguyen_f1"), load("nguyen_f2")
    out = evaluate_members([f1, f2], lambda x: torch.zeros(*x.shape[:-1], 1, dtype=x.dtype))
    assert out[0]["test_rmse"] == pytest.approx(f1.y_test.square().mean().sqrt().item())
    assert out[1]["test_rmse"] == pytest.approx(f2.y_test.square().mean().sqrt().item())
    with pytest.raises(ValueError, match="one shape"):
        evaluate_members([f1, load("nguyen_f9")], lambda x: x)
    with pytest.raises(ValueError, match="expected"):
        evaluate_members([load("sin_xy2")], lambda x: x)  # (M, N, 2) instead of (M, N, 1)


# ------------------------------------------------------------------------------- scaling
def test_minmax_maps_training_range_to_the_grid_and_targets_are_standardized():
    ds = load("sin_xy2")
    s = fit_scaling(ds)
    x = s.x(ds.x_train)
    torch.testing.assert_close(x.amin(0), -torch.ones(2, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(x.amax(0), torch.ones(2, dtype=torch.float64), rtol=0, atol=1e-12)
    y = s.y(ds.y_train)
    assert abs(y.mean().item()) < 1e-12 and abs(y.std(correction=0).item() - 1) < 1e-12
    torch.testing.assert_close(s.y_inverse(y), ds.y_train, rtol=0, atol=1e-12)


def test_scaling_options_and_training_statistics_only():
    ds = load("nguyen_f8")
    st = fit_scaling(ds, "standardize", standardize_targets=False)
    x = st.x(ds.x_train)
    assert abs(x.mean().item()) < 1e-12 and abs(x.std(correction=0).item() - 1) < 1e-12
    assert torch.equal(st.y(ds.y_train), ds.y_train)
    none = fit_scaling(ds, "none")
    assert torch.equal(none.x(ds.x_test), ds.x_test)
    shifted = dataclasses.replace(ds, x_test=ds.x_test + 100, y_test=ds.y_test - 100)
    again = fit_scaling(shifted)
    assert torch.equal(again.x_shift, fit_scaling(ds).x_shift) and torch.equal(again.y_scale, fit_scaling(ds).y_scale)
    with pytest.raises(ConfigError, match="input_scaling='robust'.*minmax"):
        fit_scaling(ds, "robust")


def test_constant_training_column_maps_to_zero():
    ds = load("nguyen_f1", n_train=8, n_test=2)
    flat = dataclasses.replace(ds, x_train=torch.full_like(ds.x_train, 0.3))
    s = fit_scaling(flat)
    assert torch.equal(s.x(flat.x_train), torch.zeros_like(flat.x_train))


def test_stacked_scalings_apply_member_wise():
    datasets = [load("nguyen_f10", seed=s, n_train=50, n_test=10) for s in range(3)]
    scalings = [fit_scaling(d) for d in datasets]
    stacked = stack_scalings(scalings)
    x = torch.stack([d.x_train for d in datasets])  # (M, N, q)
    y = torch.stack([d.y_train for d in datasets])
    for m, s in enumerate(scalings):
        assert torch.equal(stacked.x(x)[m], s.x(datasets[m].x_train))
        assert torch.equal(stacked.y(y)[m], s.y(datasets[m].y_train))
        assert torch.equal(stacked.y_inverse(y)[m], s.y_inverse(datasets[m].y_train))
    assert stacked.x(x.float()).dtype == torch.float32  # follows the input's dtype


# ------------------------------------------------------------------------------ concrete
def sorted_rows(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


@needs_shared
def test_concrete_has_the_raw_and_derived_inputs_of_the_raw_file():
    ds = load("concrete")
    raw = pd.read_csv(SHARED_DATA / "concrete.csv")
    assert ds.input_names == (*raw.columns[:8], "water_cement_ratio", "water_binder_ratio", "total_binder",
                              "total_aggregate", "log_age_plus_1")
    assert ds.target_unit == "MPa" and ds.provenance["reference_copy"]
    x = torch.cat([ds.x_train, ds.x_test]).numpy()
    y = torch.cat([ds.y_train, ds.y_test]).numpy()
    # train + test is the whole file, each row once (the split is a permutation)
    np.testing.assert_array_equal(sorted_rows(np.column_stack([x[:, :8], y])), sorted_rows(raw.to_numpy()))
    cement, slag, fly_ash, water, _, coarse, fine, age = x[:, :8].T
    binder = cement + slag + fly_ash
    for j, derived in enumerate([water / cement, water / binder, binder, coarse + fine, np.log(age + 1)]):
        np.testing.assert_array_equal(x[:, 8 + j], derived)
    assert not same_data(ds, load("concrete", seed=1))


@needs_shared
def test_superconductor_has_the_five_inputs_drawn_without_replacement():
    ds = load("superconductor")
    assert ds.input_names == ("number_of_elements", "wtd_mean_Valence", "entropy_Valence",
                              "wtd_mean_fie", "mean_ElectronAffinity")
    assert ds.output_names == ("critical_temp",) and ds.target_unit == "K"
    raw = pd.read_csv(SHARED_DATA / "superconductor.csv").to_numpy()
    drawn = np.column_stack([torch.cat([ds.x_train, ds.x_test]).numpy(), torch.cat([ds.y_train, ds.y_test]).numpy()])
    counts = pd.Series(map(tuple, raw)).value_counts()
    drawn_counts = pd.Series(map(tuple, drawn)).value_counts()
    assert (drawn_counts <= counts.reindex(drawn_counts.index)).all(), (
        "every drawn row is in the file, none more often than there")


def write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def corrupt(text: str, kind: str) -> str:
    lines = text.splitlines()
    if kind == "truncated":
        return "\n".join(lines[: len(lines) // 2]) + "\n"
    if kind == "cut mid-line":
        return text[: len(text) // 2]
    if kind == "non-numeric":
        cells = lines[5].split(",")
        cells[1] = "abc"
        lines[5] = ",".join(cells)
    if kind == "out of range":
        cells = lines[7].split(",")
        cells[0] = "5400" if "cement" in lines[0] else "90"
        lines[7] = ",".join(cells)
    if kind == "missing column":
        lines = [",".join(line.split(",")[:-1]) for line in lines]
    if kind == "empty":
        return ""
    return "\n".join(lines) + "\n"


@needs_shared
@pytest.mark.parametrize("name", ["concrete", "superconductor"])
@pytest.mark.parametrize("kind", ["truncated", "cut mid-line", "non-numeric", "out of range",
                                  "missing column", "empty"])
def test_a_bad_copy_is_a_data_error_naming_the_file(tmp_path, name, kind):
    good = (SHARED_DATA / f"{name}.csv").read_text()
    bad = tmp_path / f"{name}.csv"
    bad.write_text(corrupt(good, kind))
    with pytest.raises(DataError) as err:
        load(name, data_dir=tmp_path)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


@needs_shared
def test_a_users_own_copy_passes_the_checks(tmp_path):
    rounded = pd.read_csv(SHARED_DATA / "concrete.csv").round(2)  # like the common 2-decimal copies
    rounded.to_csv(tmp_path / "concrete.csv", index=False)
    ds = load("concrete", data_dir=tmp_path)
    assert ds.provenance["format"] == "normalized" and not ds.provenance["reference_copy"]
    assert ds.n_train == 824


@needs_shared
def test_data_folder_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KANX_DATA_DIR", str(SHARED_DATA))
    assert load_dataset("concrete", data_seed=0).provenance["file"] == str(SHARED_DATA / "concrete.csv")
    with pytest.raises(DataError, match=r"from the option data_dir=.*missing\) does not exist; set dataset.data_dir"):
        load_dataset("concrete", data_seed=0, data_dir=tmp_path / "missing")


def test_a_missing_kanx_data_dir_is_named_as_the_environment_variable(monkeypatch, tmp_path):
    """conf/dataset/concrete.yaml passes ${oc.env:KANX_DATA_DIR} as the option data_dir: the
    message still names the variable the user set, and its value."""
    missing = str(tmp_path / "missing")
    monkeypatch.setenv("KANX_DATA_DIR", missing)
    for options in ({}, {"data_dir": missing}):
        with pytest.raises(DataError) as err:
            load_dataset("concrete", data_seed=0, **options)
        assert f"from the environment variable KANX_DATA_DIR={missing}) does not exist" in str(err.value)
        assert "set the environment variable KANX_DATA_DIR to" in str(err.value) and "option" not in str(err.value)



def test_an_empty_kanx_data_dir_reads_as_unset_not_as_a_bad_option(offline, monkeypatch, tmp_path):
    """A variable set to nothing reaches the option as '' through ${oc.env:KANX_DATA_DIR,null}:
    the lookup goes on to the cache and says where to put the file, as with no variable."""
    monkeypatch.setenv("KANX_DATA_DIR", "")
    with pytest.raises(DataError, match=r"neither concrete.csv nor Concrete_Data.xls is in .*cache"):
        load_dataset("concrete", data_seed=0, data_dir="")
    monkeypatch.setenv("KANX_DATA_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=r"option data_dir='' is invalid, expected a file or folder path"):
        load_dataset("concrete", data_seed=0, data_dir="")  # given as the option itself: still refused

# --------------------------------------------------------------------- official UCI files
SUPERCONDUCTOR_PROPERTIES = ["atomic_mass", "fie", "atomic_radius", "Density", "ElectronAffinity", "FusionHeat",
                             "ThermalConductivity", "Valence"]
SUPERCONDUCTOR_STATS = ["mean", "wtd_mean", "gmean", "wtd_gmean", "entropy", "wtd_entropy", "range",
                        "wtd_range", "std", "wtd_std"]
OFFICIAL_COLUMNS = ["number_of_elements", *(f"{s}_{p}" for p in SUPERCONDUCTOR_PROPERTIES
                                            for s in SUPERCONDUCTOR_STATS), "critical_temp"]


@pytest.fixture(scope="module")
def official_train_csv(tmp_path_factory) -> Path:
    """An 82-column train.csv like UCI's: the 6 used columns from the shared file, zeros elsewhere."""
    if not (SHARED_DATA / "superconductor.csv").is_file():
        pytest.skip(f"{SHARED_DATA} is not there")
    used = pd.read_csv(SHARED_DATA / "superconductor.csv")
    table = pd.DataFrame({c: used[c] if c in used else 0 for c in OFFICIAL_COLUMNS})
    path = tmp_path_factory.mktemp("uci") / "train.csv"
    table.to_csv(path, index=False)
    return path


def test_official_superconductor_file_gives_the_same_data(tmp_path, official_train_csv):
    (tmp_path / "train.csv").write_bytes(official_train_csv.read_bytes())
    ds = load("superconductor", data_dir=tmp_path)
    assert ds.provenance["format"] == "official" and same_data(ds, load("superconductor"))
    # a short copy fails the row count
    write_lines(tmp_path / "short" / "train.csv", official_train_csv.read_text().splitlines()[:100])
    with pytest.raises(DataError, match=r"short/train.csv: has 99 data rows, expected 21263"):
        load("superconductor", data_dir=tmp_path / "short")


def test_official_converters_check_the_header():
    names = list(tabular.CONCRETE.columns)
    official = ["Cement (component 1)(kg in a m^3 mixture)", "Blast Furnace Slag (component 2)(kg in a m^3 mixture)",
                "Fly Ash (component 3)(kg in a m^3 mixture)", "Water  (component 4)(kg in a m^3 mixture)",
                "Superplasticizer (component 5)(kg in a m^3 mixture)",
                "Coarse Aggregate  (component 6)(kg in a m^3 mixture)",
                "Fine Aggregate (component 7)(kg in a m^3 mixture)", "Age (day)",
                "Concrete compressive strength(MPa, megapascals) "]
    sheet = pd.DataFrame([[540, 0, 0, 162, 2.5, 1040, 676, 28, 79.99]], columns=official)
    assert list(tabular.concrete_from_official(sheet, Path("Concrete_Data.xls")).columns) == names
    with pytest.raises(DataError, match="Concrete_Data.xls: header"):
        tabular.concrete_from_official(sheet.iloc[:, :8], Path("Concrete_Data.xls"))
    wide = pd.DataFrame(0, index=range(3), columns=OFFICIAL_COLUMNS)
    assert (list(tabular.superconductor_from_official(wide, Path("train.csv")).columns)
            == list(tabular.SUPERCONDUCTOR.columns))
    with pytest.raises(DataError, match=r"train.csv: has 81 columns \(missing \['wtd_mean_fie'\]\)"):
        tabular.superconductor_from_official(wide.drop(columns="wtd_mean_fie"), Path("train.csv"))


def test_missing_data_fails_fast_saying_how_to_supply_it(monkeypatch, tmp_path):
    asked = {}

    def offline(url, timeout=None):
        asked.update(url=url, timeout=timeout)
        raise URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(tabular, "urlopen", offline)
    with pytest.raises(DataError) as err:
        load("concrete", data_dir=tmp_path)
    message = str(err.value)
    cached = tmp_path / "cache" / "kanx" / "concrete" / "Concrete_Data.xls"
    for word in ("Concrete_Data.xls", "concrete.csv", tabular.CONCRETE.url, "KANX_DATA_DIR", str(cached),
                 "Name or service not known"):
        assert word in message
    assert asked["url"] == tabular.CONCRETE.url and asked["timeout"] <= 30


def test_download_goes_to_the_cache_and_is_checked(monkeypatch, tmp_path, official_train_csv):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.write(official_train_csv, "train.csv")
        z.writestr("unique_m.csv", "material\n")
    calls = []

    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def serve(url, timeout=None):
        calls.append(url)
        return Response(archive.getvalue())

    monkeypatch.setattr(tabular, "urlopen", serve)
    empty = tmp_path / "empty"
    empty.mkdir()
    ds = load("superconductor", data_dir=empty)
    cached = tmp_path / "cache" / "kanx" / "superconductor" / "train.csv"
    assert ds.provenance["file"] == str(cached) and cached.is_file()
    assert same_data(ds, load("superconductor"))
    load("superconductor", data_dir=empty)
    assert len(calls) == 1, "the second load uses the cached copy"
    # a download that fails its checks is not left in the cache
    cached.unlink()
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("train.csv", ",".join(OFFICIAL_COLUMNS) + "\n" + ",".join(["1"] * 82) + "\n")
    with pytest.raises(DataError, match="expected 21263"):
        load("superconductor", data_dir=empty)
    assert not cached.exists()


# ----------------------------------------------------------------------------- csv
CSV_LINES = ["id,a,b,c,label"] + [f"s{i},{i},{i * i % 7},{(i * 3) % 5 - 2.5},{2 * i + 1}" for i in range(20)]


def test_csv_trains_on_any_numeric_table(tmp_path):
    path = write_lines(tmp_path / "mine.csv", CSV_LINES)
    ds = load("csv", path=str(path), target="label")
    assert ds.input_names == ("a", "b", "c") and ds.output_names == ("label",), "text column id is left out"
    assert (ds.n_train, ds.n_test) == (16, 4) and ds.family == "csv"
    torch.testing.assert_close(ds.y_train[:, 0], 2 * ds.x_train[:, 0] + 1)
    assert same_data(ds, load("csv", path=str(path), target="label"))
    assert not same_data(ds, load("csv", seed=1, path=str(path), target="label"))
    picked = load("csv", path=str(path), target="label", features=["c", "a"], test_fraction=0.5)
    assert picked.input_names == ("c", "a") and (picked.n_train, picked.n_test) == (10, 10)
    assert load("csv", path=path, target="label", n_train=5).n_test == 15


@pytest.mark.parametrize(
    "lines, options, error, words",
    [
        (None, {"target": "label"}, DataError, ["no such file"]),
        (CSV_LINES, {"target": "lable"}, DataError, ["'lable'", "the columns are"]),
        (CSV_LINES, {"target": "label", "features": ["a", "z"]}, DataError, ["'z'"]),
        ([*CSV_LINES[:4], "s9,9,abc,1,19", *CSV_LINES[4:]], {"target": "label"}, DataError,
         ["'b'", "'abc'", "data row 4"]),
        ([*CSV_LINES[:4], "s9,9,,1,19", *CSV_LINES[4:]], {"target": "label"}, DataError,
         ["'b'", "missing", "data row 4"]),
        ([*CSV_LINES[:4], "s9,9,1,1,oops", *CSV_LINES[4:]], {"target": "label"}, DataError, ["'label'", "'oops'"]),
        (CSV_LINES[:3], {"target": "label"}, DataError, ["2 data rows", "at least 2 training and 1 test"]),
        (CSV_LINES, {"target": "label", "features": ["label"]}, ConfigError, ["must not include the target"]),
        (["id,label", "a,1", "b,2", "c,3"], {"target": "label"}, DataError, ["no numeric column besides the target"]),
        (["a,b", '1,"2'], {"target": "a"}, DataError, ["cannot be read"]),
        (["a,b,label"], {"target": "label"}, DataError, ["header row (a, b, label) but no rows of data"]),
    ],
)
def test_csv_errors_name_the_problem(tmp_path, lines, options, error, words):
    path = tmp_path / "bad.csv"
    if lines is not None:
        write_lines(path, lines)
    with pytest.raises(error) as err:
        load("csv", path=str(path), **options)
    message = str(err.value)
    assert "\n" not in message and (error is ConfigError or str(path) in message)
    for word in words:
        assert word in message
