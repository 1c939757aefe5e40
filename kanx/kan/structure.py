"""Structure metrics of a discretized model: contributing edges and compositional depth.

Paper, Methods "Evaluation measures": mask inactive edges (closed egates, unused exit
heads; with node or input gates, every edge of a closed node: GatedKAN.inference_gates);
trace backward from the outputs to find connected edges; trace forward from the
inputs along connected edges to find the input-to-output paths (their longest length is
the compositional depth); connected edges off those paths are bias terms, merged into
one per connected component. Contributing edges = path edges + bias components.

What a factor adds to the record about the structure it leaves (with I: the inputs kept) is a
RecordRule in RECORD_RULES; kanx.evaluate scores every rule of a run's condition.

Nodes are numbered x^(0) units first, then x^(1), ..., x^(L-1), then the n_L outputs of
the selected exit; with forward connections, stage k's inputs [x^(0), ..., x^(k)] are
then the contiguous ids 0 .. n_0 + ... + n_k - 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kanx.vocab import FACTOR_FIELDS, RECORD_METRICS, RECORD_SELECTED_INPUTS

if TYPE_CHECKING:  # the trace is numpy only, so the torch-free analysis can use it
    import torch

    from kanx.kan.network import GatedKAN


@dataclass(frozen=True)
class Structure:
    contributing_edges: int
    depth: int
    bias_terms: int
    path_edges: int
    open_gates: int
    exit: int

    def as_dict(self) -> dict:
        return asdict(self)


NodeKey = tuple  # ("x", layer, unit): an input or trunk node; ("y", exit, output): an exit's output


def source_node(model: GatedKAN, k: int, i: int) -> NodeKey:
    """The node that input i of stage k reads: x^(k)_i, or with forward connections the i-th
    of [x^(0), ..., x^(k)] (the drawing's and the formula's node names)."""
    if not model.condition.forward:
        return ("x", k, i)
    for layer in range(k + 1):
        if i < model.width[layer]:
            return ("x", layer, i)
        i -= model.width[layer]
    raise IndexError(f"stage {k} has no input {i}")


def dest_node(model: GatedKAN, k: int, o: int) -> NodeKey:
    """The node that output column o of stage k writes: trunk unit x^(k+1)_o, or exit k's output."""
    trunk = model.trunk_out[k]
    return ("x", k + 1, o) if o < trunk else ("y", k, o - trunk)


def _stage_edges(width: Sequence[int], forward: bool, k: int, exit_k: int):
    """(source ids, destination ids, column slice) of stage k's edges that the inference
    path through exit ``exit_k`` uses, or None if the stage is not on it."""
    L = len(width) - 1
    offsets = np.concatenate([[0], np.cumsum(width)])  # x^(l) starts at offsets[l]; outputs at offsets[L]
    src = np.arange(offsets[k + 1]) if forward else np.arange(offsets[k], offsets[k + 1])
    trunk = width[k + 1] if k < L - 1 else 0
    outputs = np.arange(offsets[L], offsets[L] + width[L])
    if k < exit_k:  # a trunk layer before the exit
        return src, offsets[k + 1] + np.arange(trunk), slice(0, trunk)
    if k == exit_k:  # the exit head (stage L-1: the final layer)
        return src, outputs, slice(trunk, None)
    return None


def _backward_forward(width: Sequence[int], forward: bool, open_edges: Sequence[np.ndarray], exit_k: int | None):
    """The trace itself, shared by trace() and edge_roles(): per stage on the inference
    path, (src ids, dst ids, column slice, open mask, connected mask, path mask), the
    compositional depth and the exit used (L-1 when exit_k is None)."""
    width = [int(w) for w in width]
    L = len(width) - 1
    exit_k = L - 1 if exit_k is None else int(exit_k)
    n_nodes = sum(width)  # x^(0..L-1) units plus the n_L outputs
    stages = []
    for k in range(exit_k + 1):
        src, dst, cols = _stage_edges(width, forward, k, exit_k)
        stages.append((src, dst, cols, np.asarray(open_edges[k], dtype=bool)[:, cols]))

    reach_out = np.zeros(n_nodes, dtype=bool)  # backward: node has a path to an output
    reach_out[sum(width[:L]) :] = True
    connected: list[np.ndarray] = []  # built from the last stage back, then put in stage order
    for src, dst, _, mask in reversed(stages):
        connected.append(mask & reach_out[dst][None, :])
        reach_out[src] |= connected[-1].any(axis=1)
    connected.reverse()

    from_in = np.zeros(n_nodes, dtype=bool)  # forward: node reached from an input
    from_in[: width[0]] = True
    dist = np.full(n_nodes, -1, dtype=np.int64)  # longest path length from an input
    dist[: width[0]] = 0
    out = []
    for (src, dst, cols, mask), conn in zip(stages, connected, strict=True):
        path = conn & from_in[src][:, None]
        for i, j in zip(*np.nonzero(path), strict=True):
            dist[dst[j]] = max(dist[dst[j]], dist[src[i]] + 1)
        from_in[dst] |= path.any(axis=0)
        out.append((src, dst, cols, mask, conn, path))
    depth = int(max(dist[sum(width[:L]) :].max(), 0))
    return out, depth, exit_k


def trace(width: Sequence[int], forward: bool, open_edges: Sequence[np.ndarray],
          exit_k: int | None = None) -> Structure:
    """Backward-forward trace of one member.

    open_edges[k]: bool (I_k, O_k) open edges of stage k (columns [trunk | head], as in
    GatedKAN); exit_k: the selected exit (L-1, the final layer, without X).
    """
    stages, depth, exit_k = _backward_forward(width, forward, open_edges, exit_k)
    n_path, bias_edges = 0, []
    for src, dst, _, _, conn, path in stages:
        n_path += int(path.sum())
        bias_edges += [(src[i], dst[j]) for i, j in zip(*np.nonzero(conn & ~path), strict=True)]

    used_open = sum(int(mask.sum()) for _, _, _, mask, _, _ in stages)
    n_bias = _components(bias_edges)
    return Structure(n_path + n_bias, depth, n_bias, n_path, used_open, exit_k)


@dataclass(frozen=True)
class EdgeRoles:
    """Which edges the trace found, per stage k as (I_k, O_k) arrays in GatedKAN's column
    layout [trunk | head] (every stage, the ones off the inference path all False/-1).

    path[k]: the edge lies on an input-to-output path. bias[k]: connected to the output
    but off every path (a bias term). bias_component[k]: the bias term (0, 1, ...) the
    edge belongs to, -1 for non-bias edges. Contributing edges =
    sum(path) + n_bias_components, and depth, as in trace()."""

    path: list[np.ndarray]
    bias: list[np.ndarray]
    bias_component: list[np.ndarray]
    n_bias_components: int
    depth: int
    exit: int

    @property
    def contributing_edges(self) -> int:
        return int(sum(int(p.sum()) for p in self.path)) + self.n_bias_components


def edge_roles(width: Sequence[int], forward: bool, open_edges: Sequence[np.ndarray],
               exit_k: int | None = None) -> EdgeRoles:
    """The edges behind trace()'s counts: path edges and bias edges (with their component),
    from the same backward-forward pass. Arguments as trace()."""
    shapes = [np.asarray(e).shape for e in open_edges]
    path = [np.zeros(s, dtype=bool) for s in shapes]
    bias = [np.zeros(s, dtype=bool) for s in shapes]
    comp = [np.full(s, -1, dtype=np.int64) for s in shapes]
    stages, depth, exit_k = _backward_forward(width, forward, open_edges, exit_k)
    bias_edges, where = [], []
    for k, (src, dst, cols, _, conn, p) in enumerate(stages):
        path[k][:, cols] = p
        bias[k][:, cols] = conn & ~p
        columns = np.arange(shapes[k][1])[cols]
        for i, j in zip(*np.nonzero(conn & ~p), strict=True):
            bias_edges.append((src[i], dst[j]))
            where.append((k, i, columns[j]))
    labels = _component_labels(bias_edges)
    for (k, i, o), label in zip(where, labels, strict=True):
        comp[k][i, o] = label
    return EdgeRoles(path, bias, comp, len(set(labels)), depth, exit_k)


def path_sources(width: Sequence[int], forward: bool, roles: EdgeRoles) -> list[int]:
    """Node ids (x^(0) units first, then x^(1), ..., as in the module docstring) that a path edge
    leaves, in order: the units an input-to-output path runs through (the outputs aside). A unit
    that only feeds bias terms is not among them: its edges merge into a constant."""
    used = np.zeros(sum(int(w) for w in width[:-1]), dtype=bool)
    for k, path in enumerate(roles.path):
        rows = path.any(axis=1)  # (I_k,) stage k's inputs with a path edge
        first = 0 if forward else sum(int(w) for w in width[:k])  # node id of stage k's row 0
        used[first + np.nonzero(rows)[0]] = True
    return [int(i) for i in np.nonzero(used)[0]]


def used_inputs(width: Sequence[int], forward: bool, roles: EdgeRoles) -> list[int]:
    """The inputs a contributing edge leaves (in order): an input counts as used only then.
    An edge out of an input that reaches an output is on a path, so the path edges say it."""
    return [i for i in path_sources(width, forward, roles) if i < width[0]]


def hidden_units_kept(width: Sequence[int], forward: bool, roles: EdgeRoles) -> int:
    """How many hidden units (x^(1), ..., x^(L-1)) an input-to-output path runs through: the
    units the trained network still needs (node gates close the others, issue #38)."""
    return sum(1 for i in path_sources(width, forward, roles) if i >= width[0])


def _components(edges: list[tuple[int, int]]) -> int:
    """Connected components of the graph formed by these edges (union-find)."""
    return len(set(_component_labels(edges)))


def _component_labels(edges: list[tuple[int, int]]) -> list[int]:
    """For each edge, the index (0, 1, ... in order of first appearance) of the connected
    component it belongs to; len(set(labels)) == _components(edges)."""
    parent: dict[int, int] = {}

    def find(a: int) -> int:
        parent.setdefault(a, a)
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in edges:
        parent[find(a)] = find(b)
    index: dict[int, int] = {}
    return [index.setdefault(find(a), len(index)) for a, _ in edges]


def trained_inference_gates(model: GatedKAN, estimator: str = "threshold") -> torch.Tensor:
    """model.inference_gates with forward connections on, as at the end of training: the
    gates that the structure, the drawing and the formula all read (M, n_edges)."""
    with model.forward_connections(model.condition.forward):
        return model.inference_gates(estimator)


def _member_masks(model: GatedKAN, estimator: str) -> tuple[list, list[int]]:
    """Every member's open-edge masks per stage (I_k, O_k), in the layout of a model of its
    own condition, with forward connections on, as at the end of training (deterministic
    gates), and the argmax exit of every member."""
    gates = [g.cpu().numpy() for g in model.split_edges(trained_inference_gates(model, estimator) > 0)]
    masks = []
    for m, c in enumerate(model.members.conditions):
        blocks = [model.members.stage_block(k, c) for k in range(model.L)]
        masks.append([g[m][rows, cols] for g, (rows, cols) in zip(gates, blocks, strict=True)])
    return masks, model.selected_exit().tolist()


def model_structure(model: GatedKAN, estimator: str = "threshold") -> list[Structure]:
    """Structure of every member of a trained model (forward connections on, as at the
    end of training; deterministic gates; the argmax exit)."""
    masks, exits = _member_masks(model, estimator)
    return [trace(model.width, c.forward, masks[m], exits[m]) for m, c in enumerate(model.members.conditions)]


def model_used_inputs(model: GatedKAN, estimator: str = "threshold") -> list[list[int]]:
    """used_inputs() of every member, under the same conditions as model_structure()."""
    roles_of = model_edge_roles(model, estimator)
    return [used_inputs(model.width, c.forward, roles)
            for c, roles in zip(model.members.conditions, roles_of, strict=True)]


def model_hidden_units_kept(model: GatedKAN, estimator: str = "threshold") -> list[int]:
    """hidden_units_kept() of every member, under the same conditions as model_structure()."""
    roles_of = model_edge_roles(model, estimator)
    return [hidden_units_kept(model.width, c.forward, roles)
            for c, roles in zip(model.members.conditions, roles_of, strict=True)]


def model_edge_roles(model: GatedKAN, estimator: str = "threshold") -> list[EdgeRoles]:
    """edge_roles() of every member, under the same conditions as model_structure()."""
    masks, exits = _member_masks(model, estimator)
    return [edge_roles(model.width, c.forward, masks[m], exits[m]) for m, c in enumerate(model.members.conditions)]


# ---------------------------------------------------------------- what a factor adds to the record
@dataclass(frozen=True)
class RecordRule:
    """A metric of the structure a factor leaves, in the record of every run whose condition has
    the factor (``flag``, its Condition field): ``measure(model, estimator, dataset)`` of the run's
    one-member model (kanx.evaluate scores each run alone) is record["metrics"][``metric``], a
    JSON value."""

    flag: str
    metric: str
    measure: Callable[[GatedKAN, str, Any], object]


def _selected_inputs(model: GatedKAN, estimator: str, dataset) -> list[str]:
    """With I: the dataset's names of the inputs a contributing edge leaves."""
    (used,) = model_used_inputs(model, estimator)
    return [dataset.input_names[i] for i in used]


# The metrics factors add, by name, in the order a record lists them (after the structure's).
RECORD_RULES: dict[str, RecordRule] = {
    RECORD_SELECTED_INPUTS: RecordRule("input_gates", RECORD_SELECTED_INPUTS, _selected_inputs),
}


def register_record_rule(rule: RecordRule) -> None:
    """Add a factor's record metric. Raises ValueError for a flag that is no factor's, or a metric
    name a record already has."""
    if rule.flag not in FACTOR_FIELDS.values():
        raise ValueError(f"record rule flag {rule.flag!r} is no factor's field: {', '.join(FACTOR_FIELDS.values())}")
    if rule.metric in RECORD_RULES or rule.metric in RECORD_METRICS:
        raise ValueError(f"record metric {rule.metric!r} is taken: {', '.join((*RECORD_METRICS, *RECORD_RULES))}")
    RECORD_RULES[rule.metric] = rule


def unregister_record_rule(metric: str) -> None:
    """Take back what register_record_rule added."""
    del RECORD_RULES[metric]


def record_metrics(model: GatedKAN, estimator: str, dataset) -> dict:
    """The metrics the factors of a one-member model's condition add to its record (RECORD_RULES)."""
    rules = [r for r in RECORD_RULES.values() if getattr(model.condition, r.flag, False)]
    return {r.metric: r.measure(model, estimator, dataset) for r in rules}
