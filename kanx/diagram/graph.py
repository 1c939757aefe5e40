"""The network as drawn: every edge of a trained member with its role in the trace
(kanx.kan.structure: node numbering by source_node / dest_node, roles by model_edge_roles),
and the plan of a drawing (edges, node ranges, exit probabilities; no matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from kanx.kan.network import GatedKAN
from kanx.kan.structure import EdgeRoles, NodeKey, dest_node, model_edge_roles, source_node

from .values import node_ranges


class Run(Protocol):
    """What the drawing reads of a trained run (kanx.load.TrainedRun is one): the model, the
    names of its inputs and outputs (labels), and its record (title; the contributing edges
    it counted, checked against the drawing)."""

    @property
    def record(self) -> dict: ...

    @property
    def model(self) -> GatedKAN: ...

    @property
    def gate_estimator(self) -> str: ...

    @property
    def input_names(self) -> Sequence[str]: ...

    @property
    def output_names(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class EdgeInfo:
    """One edge of the network and what the trace says of it."""

    stage: int
    i: int  # input index of the stage (x_cat order with forward connections)
    o: int  # column of the stage ([trunk | head])
    src: NodeKey
    dst: NodeKey
    role: str  # "path", "bias" or "hidden" (closed, or open but not contributing)
    component: int  # bias term index (0, 1, ...), -1 unless role == "bias"
    forward: bool  # reads an earlier layer through a forward connection
    head: bool  # belongs to an exit head (the final layer with X; see _edge_table)

    @property
    def gid(self) -> str:
        """Identifier of the artists drawn for this edge (Artist.get_gid, the SVG id), with
        a suffix per artist: ":in" / ":out" (the line to / from its plot), ":plot", ":line"
        (a line without a plot)."""
        return f"kanx-edge:{self.stage}:{self.i}:{self.o}:{self.role}"


@dataclass
class Drawing:
    """What draw() drew (kanx.draw.draw_run), returned beside its figure."""

    edges: list[EdgeInfo]
    roles: EdgeRoles
    node_ranges: dict[NodeKey, tuple[float, float]]
    range_source: str  # "training data" or "spline grid (...)"
    pi: np.ndarray | None  # exit gate probabilities (X only)
    selected_exit: int
    record_contributing_edges: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def drawn(self) -> list[EdgeInfo]:
        return [e for e in self.edges if e.role != "hidden"]

    @property
    def hidden(self) -> list[EdgeInfo]:
        return [e for e in self.edges if e.role == "hidden"]

    @property
    def contributing_edges(self) -> int:
        """Path edges plus bias components, as drawn: the paper's contributing edges."""
        path = sum(e.role == "path" for e in self.edges)
        return path + len({e.component for e in self.edges if e.role == "bias"})


def _edge_table(model: GatedKAN, roles: EdgeRoles) -> list[EdgeInfo]:
    """Every edge of the (single-member) model with its role. "head" marks exit heads, the
    final layer included, when the model has exit gates (X); without X the final layer
    is the plain output layer."""
    edges = []
    for k, (n_in, n_out) in enumerate(model.edge_shapes):
        for i in range(n_in):
            for o in range(n_out):
                role = "path" if roles.path[k][i, o] else "bias" if roles.bias[k][i, o] else "hidden"
                src = source_node(model, k, i)
                dst = dest_node(model, k, o)
                edges.append(EdgeInfo(k, i, o, src, dst, role, int(roles.bias_component[k][i, o]),
                                      forward=src[1] < k, head=dst[0] == "y" and model.condition.exits))
    return edges


def plan(run: Run, inputs: torch.Tensor | None) -> Drawing:
    """What draw() draws for a trained run: every edge and its role, node ranges over
    ``inputs`` (the run's training inputs, model-scaled (N, n_0); None: over the spline
    grids), exit probabilities. No matplotlib."""
    model = run.model
    roles = model_edge_roles(model, run.gate_estimator)[0]
    ranges, source = node_ranges(model, run.gate_estimator, inputs)
    pi = model.exit_probs()[0].detach().numpy() if model.condition.exits else None
    metrics = run.record.get("metrics") or {}
    d = Drawing(_edge_table(model, roles), roles, ranges, source, pi, int(model.selected_exit()[0]),
                metrics.get("contributing_edges"))
    if d.record_contributing_edges is not None and d.record_contributing_edges != d.contributing_edges:
        d.notes.append(f"record says {d.record_contributing_edges} contributing edges, the model's trace "
                       f"{d.contributing_edges}")
    return d
