"""kanx.draw: what is drawn is exactly the trace's contributing edges, on real saved runs.

Two tiny runs of sin(x + y^2) are trained in-process through the runner (so they are saved
and loaded by the same code as any run), one EFX and one Baseline; a third is the EFX run
with hand-set gates that make a bias term and a dangling open edge, saved back to model.pt.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
import torch
from helpers import ROOT, TOY, flat_edge, train_run
from matplotlib.figure import Figure

import kanx
from kanx import diagram, draw
from kanx.analyze.select import draw_median_models, median_runs
from kanx.kan.network import Condition, GatedKAN, KANSpec
from kanx.kan.structure import edge_roles, model_structure, trace
from kanx.records import seal, write_record

SHORT = [*TOY, "train.epochs=3", "train.warmup=1", "train.fc_warmup=1", "device=cpu"]


def _train(run_dir: Path, *overrides) -> Path:
    return train_run(run_dir, *SHORT, *overrides)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("draw")
    efx = _train(root / "sin_xy2" / "EFX" / "beta=0.2,seed=0", "+condition=EFX")
    base = _train(root / "sin_xy2" / "Baseline" / "beta=0.0,seed=0", "+condition=baseline", "beta=0.0")
    # The EFX run with hand-set gates, saved through model.pt like any run.
    hand = root / "hand" / "EFX"
    shutil.copytree(efx, hand)
    saved = torch.load(hand / "model.pt", weights_only=True)
    run = kanx.load_run(efx)
    alpha = torch.full((run.model.n_edges,), -10.0)  # all closed
    open_ = {(0, 0, 0), (1, 2, 0), (2, 4, 0), (2, 1, 0),  # paths x -> h1_0 -> h2_0 -> out and y -> out (FC)
             (2, 3, 0), (1, 3, 0),  # h1_1 has no open input: h1_1 -> out and h1_1 -> h2_0 are one bias term
             (0, 1, 2)}  # y -> exit 0's head: open, but exit 0 is not selected
    for k, i, o in open_:
        alpha[flat_edge(run.model, k, i, o)] = 10.0
    saved["model"]["alpha"] = alpha
    saved["model"]["exit_logits"] = torch.tensor([-5.0, -5.0, 5.0])  # the final exit
    torch.save(saved, hand / "model.pt")
    seal(hand)  # a deliberate edit: the done marker's checksums follow it
    return {"EFX": efx, "Baseline": base, "hand": hand, "root": root}


@pytest.mark.parametrize("condition", ["Baseline", "F", "X", "EFX"])
def test_edge_roles_agree_with_trace(condition):
    """edge_roles() names the edges behind every count of trace(), on random gate masks."""
    rng = np.random.default_rng(0)
    for width in [(2, 2, 1, 1), (2, 3, 3, 1), (1, 4, 2, 3, 2)]:
        model = GatedKAN(KANSpec(width), Condition.from_name(condition), seeds=[0])
        for exit_k in range(model.L) if model.condition.exits else [model.L - 1]:
            for p in (0.2, 0.5, 0.8):
                for _ in range(20):
                    masks = [rng.random(shape) < p for shape in model.edge_shapes]
                    s, r = (trace(width, model.condition.forward, masks, exit_k),
                            edge_roles(width, model.condition.forward, masks, exit_k))
                    assert (r.contributing_edges, r.n_bias_components, r.depth) == (
                        s.contributing_edges, s.bias_terms, s.depth)
                    assert sum(int(a.sum()) for a in r.path) == s.path_edges
                    for m, a, b, c in zip(masks, r.path, r.bias, r.bias_component, strict=True):
                        assert not (a & b).any() and not ((a | b) & ~m).any() and ((c >= 0) == b).all()


def _drawn_gids(fig) -> tuple[set, set]:
    """(edges with an activation plot, edges with any artist) as (stage, i, o, role)."""
    ax = fig.axes[0]
    parse = lambda gid: tuple(int(v) for v in gid.split(":")[1:4]) + (gid.split(":")[4],)  # noqa: E731
    plots = {parse(a.get_gid()) for a in ax.child_axes if (a.get_gid() or "").startswith("kanx-edge:")}
    lines = {parse(ln.get_gid()) for ln in ax.lines if (ln.get_gid() or "").startswith("kanx-edge:")}
    return plots, lines


@pytest.mark.parametrize("name", ["EFX", "Baseline", "hand"])
def test_drawn_edges_are_the_contributing_edges(runs, name):
    run = kanx.load_run(runs[name])
    structure = model_structure(run.model, run.gate_estimator)[0]
    fig, d = draw.draw_run(run)
    assert d.range_source == "training data"
    # Path edges + bias components, as drawn, are the run's contributing edges.
    assert d.contributing_edges == structure.contributing_edges and d.roles.depth == structure.depth
    if name != "hand":
        assert d.contributing_edges == run.record["metrics"]["contributing_edges"]
    assert sum(e.role == "path" for e in d.edges) == structure.path_edges
    assert len({e.component for e in d.edges if e.role == "bias"}) == structure.bias_terms
    assert len(d.edges) == run.model.n_edges
    # The figure holds a plot (and lines) for exactly the contributing edges, nothing else.
    plots, lines = _drawn_gids(fig)
    contributing = {(e.stage, e.i, e.o, e.role) for e in d.drawn}
    assert plots == contributing and lines == contributing
    # With --show-closed the other edges appear too, as lines only.
    plots, lines = _drawn_gids(draw.draw_run(run, show_closed=True)[0])
    assert plots == contributing
    assert lines - contributing == {(e.stage, e.i, e.o, "hidden") for e in d.hidden}


def _picture(ax) -> dict:
    """What is on ``ax``, artist by artist: each line's id and points, each edge plot's id and
    curves, the circles and the texts."""
    def line(ln):
        return ln.get_gid(), ln.get_linestyle(), ln.get_color(), np.asarray(ln.get_xydata()).tolist()

    return {"lines": [line(ln) for ln in ax.lines],
            "plots": [(a.get_gid(), [line(ln) for ln in a.lines]) for a in ax.child_axes],
            "circles": [(p.center, p.radius, p.get_facecolor()) for p in ax.patches],
            "texts": [t.get_text() for t in ax.texts], "title": ax.get_title(),
            "limits": (ax.get_xlim(), ax.get_ylim())}


@pytest.mark.parametrize("name", ["EFX", "Baseline", "hand"])
def test_a_loaded_run_draws_itself_as_draw_run_draws_it(runs, name):
    # TrainedRun.draw calls the engine (kanx.diagram) with its own model and rebuilt inputs,
    # kanx.draw.draw_run loads through its own front end: one picture, artist for artist.
    run = kanx.load_run(runs[name])
    fig = run.draw()
    expected, d = draw.draw_run(run)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert _picture(fig.axes[0]) == _picture(expected.axes[0])
    assert _drawn_gids(fig)[0] == {(e.stage, e.i, e.o, e.role) for e in d.drawn}
    # On axes of one's own, with draw_run's options: drawn there, and that figure returned.
    mine = Figure()
    left, right = mine.subplots(1, 2)
    assert run.draw(ax=left, title="mine", show_closed=True) is mine
    assert not right.lines and not right.child_axes
    draw.draw_run(run, ax=(theirs := Figure().add_subplot()), title="mine", show_closed=True)
    assert _picture(left) == _picture(theirs)
    assert left.get_title() == "mine"


def test_a_loaded_run_without_its_data_draws_over_the_grid_and_says_so(runs):
    run = kanx.load_run(runs["EFX"])
    run.config = json.loads(json.dumps(run.config))
    run.config["dataset"]["n_train"] = 64  # not the data the model's scaling was fitted on
    with pytest.warns(UserWarning, match="cannot rebuild the training data.*grid range"):
        fig = run.draw()
    assert "edge plots over the spline grid (training data unavailable)" in _picture(fig.axes[0])["texts"]


def test_the_engine_refuses_inputs_the_model_does_not_take(runs):
    run = kanx.load_run(runs["EFX"])
    with pytest.raises(ValueError, match=r"inputs of shape \(5, 3\): the model takes \(N, 2\)"):
        diagram.plan(run, torch.zeros(5, 3))


@pytest.mark.parametrize("name", ["EFX", "Baseline", "hand"])
def test_roles_match_what_each_edge_does_to_the_output(runs, name):
    """Independent of the trace: removing a hidden edge leaves the selected exit's output
    unchanged; removing a drawn edge changes it; a bias edge's source is constant over
    the training data (no input reaches it), a path edge's is not."""
    run = kanx.load_run(runs[name])
    model, d = run.model, draw.plan(run)
    x = torch.rand(1, 200, model.width[0], generator=torch.Generator().manual_seed(0)) * 2 - 1
    gates = model.inference_gates(run.gate_estimator)
    exit_index = d.selected_exit if model.condition.exits else 0
    with torch.no_grad():
        base = model(x, gates)[0, exit_index]
        for e in d.edges:
            g = gates.clone()
            g[0, flat_edge(model, e.stage, e.i, e.o)] = 0.0
            change = (model(x, g)[0, exit_index] - base).abs().max()
            lo, hi = d.node_ranges[e.src]
            if e.role == "hidden":
                assert change < 1e-6, e
            else:
                assert change > 1e-6, e
                assert (hi - lo == 0) == (e.role == "bias"), e


def test_hand_set_gates(runs):
    d = draw.plan(kanx.load_run(runs["hand"]))
    role = {(e.stage, e.i, e.o): e.role for e in d.edges}
    assert {k for k, r in role.items() if r == "path"} == {(0, 0, 0), (1, 2, 0), (2, 4, 0), (2, 1, 0)}
    assert {k for k, r in role.items() if r == "bias"} == {(2, 3, 0), (1, 3, 0)}
    assert d.contributing_edges == 5 and d.selected_exit == 2
    assert role[(0, 1, 2)] == "hidden"  # open, but into an exit that is not selected
    fig, _ = draw.draw_run(kanx.load_run(runs["hand"]))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("bias") == 2  # one label per bias edge's plot
    forward = {(e.stage, e.i, e.o) for e in d.drawn if e.forward}
    assert forward == {(2, 1, 0), (2, 3, 0)}  # y -> out and h1_1 -> out skip a layer


def test_edge_plots_are_what_the_edge_adds(runs):
    """A plotted curve is the layer's output with only that edge open: gate included."""
    run = kanx.load_run(runs["EFX"])
    model, d = run.model, draw.plan(run)
    curves = draw.edge_curves(model, d.node_ranges, run.gate_estimator)
    gates = model.split_edges(model.inference_gates(run.gate_estimator))[0]
    for e in [e for e in d.drawn if e.stage == 0]:
        xs, ys = curves[0][0][e.i], curves[0][1][e.i, e.o]
        h = torch.zeros(1, len(xs), model.stages[0].in_features)
        h[0, :, e.i] = torch.as_tensor(xs)
        only = torch.zeros_like(gates)
        only[0, e.i, e.o] = gates[0, e.i, e.o]
        with torch.no_grad():
            out = model.stages[0](h, only)[0, :, e.o]
        torch.testing.assert_close(torch.as_tensor(ys), out, atol=1e-5, rtol=1e-5)
        lo, hi = d.node_ranges[e.src]
        assert (xs[0], xs[-1]) == pytest.approx((lo, hi))
    # Inputs are minmax-scaled to [-1, 1] on the training data: their range is that.
    assert d.node_ranges[("x", 0, 0)] == pytest.approx((-1.0, 1.0), abs=1e-6)


def test_falls_back_to_the_grid_range_without_data(runs):
    run = kanx.load_run(runs["EFX"])
    run.config = json.loads(json.dumps(run.config))
    run.config["dataset"]["n_train"] = 64  # a different draw than the model's scaling was fitted on
    with pytest.warns(UserWarning, match="grid range"):
        d = draw.plan(run)
    assert d.range_source.startswith("spline grid")
    assert d.node_ranges[("x", 0, 0)] == pytest.approx(tuple(run.model.stages[0].grid[0, 0, [3, -4]].tolist()))


@pytest.mark.slow
def test_cli_writes_every_format_and_prints_the_paths(runs, tmp_path, capsys):
    p = subprocess.run([sys.executable, "-m", "kanx.draw", str(runs["EFX"]), "--out", str(tmp_path / "fig")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    paths = [Path(line) for line in p.stdout.split()]
    assert paths == [tmp_path / f"fig.{fmt}" for fmt in ("png", "pdf", "svg")]
    assert all(path.stat().st_size > 1000 for path in paths)
    ids = [el.get("id") for el in ElementTree.parse(paths[2]).iter() if (el.get("id") or "").startswith("kanx-edge:")]
    assert ids and len(ids) == len(set(ids))  # one SVG id per artist: path, plot and line of each edge
    assert draw.main([str(tmp_path / "nothing")]) == 2
    assert "holds no finished run" in capsys.readouterr().err


def test_median_runs_pick_the_median_seed_of_ok_runs(runs, tmp_path):
    """Records only: EFX seeds with test RMSE 0.3, 0.1, 0.2, 0.05 (diverged) and 0.4 at
    another beta; the median of the ok ones at the median beta is seed 2."""
    root = tmp_path / "records"

    def clone(src, condition, beta, seed, rmse, status="ok"):
        dst = root / condition / f"beta={beta},seed={seed}"
        shutil.copytree(src, dst)
        rec = json.loads((dst / "record.json").read_text())
        rec.update(beta=beta, seed=seed, status=status)
        rec["metrics"]["test_rmse"] = rmse
        write_record(dst, rec)  # with the done marker's checksums, as kanx writes it

    for seed, rmse in [(0, 0.3), (1, 0.1), (2, 0.2)]:
        clone(runs["EFX"], "EFX", 0.2, seed, rmse)
    clone(runs["EFX"], "EFX", 0.2, 3, 0.05, status="diverged")
    clone(runs["EFX"], "EFX", 0.5, 0, 0.4)
    clone(runs["EFX"], "EFX", 0.01, 0, 0.4)
    clone(runs["Baseline"], "Baseline", 0.2, 0, 0.5)
    chosen = median_runs(root, "sin_xy2")
    assert list(chosen) == ["Baseline", "EFX"]
    assert chosen["EFX"] == root / "EFX" / "beta=0.2,seed=2"  # median beta of 0.01, 0.2, 0.5
    assert median_runs(root, "sin_xy2", beta=0.5)["EFX"] == root / "EFX" / "beta=0.5,seed=0"
    assert median_runs(root, "sin_xy2", beta=0.5)["Baseline"] == root / "Baseline" / "beta=0.2,seed=0"  # beta-free
    assert median_runs(root, "nguyen_f1") == {}


def test_draw_median_models(runs, tmp_path):
    written = draw_median_models(runs["root"] / "sin_xy2", "sin_xy2", tmp_path, combined=True)
    assert [p.name for p in written] == ["sin_xy2_Baseline.png", "sin_xy2_EFX.png", "sin_xy2_median_models.png"]
    assert all(p.stat().st_size > 1000 for p in written)
