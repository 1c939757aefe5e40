"""Where everything goes, in data units (axes are drawn with equal aspect): node rows,
activation plots spread in the bands between them, forward connections routed through
slots of the bands they cross."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kanx.kan.network import GatedKAN
from kanx.kan.structure import NodeKey

from .graph import EdgeInfo

BOX_W, BOX_H = 0.9, 0.62  # an edge's activation plot
SLOT = BOX_W + 0.22  # smallest distance between two plots of one layer
ROW = 2.35  # distance between node rows
NODE_R = 0.13
DUMMY_W = 0.3  # room a forward connection takes where it crosses a band
NODE_CLEAR = 0.4  # ... and its least distance from a node whose row it crosses


def _spread(ideal: Sequence[float], widths: Sequence[float], margin: float) -> list[float]:
    """The centres closest (least squares) to the sorted ``ideal`` ones that keep their
    order and leave ``margin`` between neighbours of the given widths (isotonic
    regression by pool-adjacent-violators on the offsets)."""
    if not ideal:
        return []
    offsets = [0.0]
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        offsets.append(offsets[-1] + (a + b) / 2 + margin)
    blocks: list[list[float]] = []  # [sum, count]
    for p, c in zip(ideal, offsets, strict=True):
        blocks.append([p - c, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
    fit = [s / n for s, n in blocks for _ in range(int(n))]
    return [v + c for v, c in zip(fit, offsets, strict=True)]


@dataclass
class Layout:
    nodes: dict[NodeKey, tuple[float, float]]
    boxes: dict[EdgeInfo, tuple[float, float]]  # centre of each shown edge's plot
    waypoints: dict[EdgeInfo, list[tuple[float, float]]]  # where a forward connection crosses lower bands

    def extent(self) -> tuple[float, float]:
        xs = [p[0] for p in self.nodes.values()] + [b[0] for b in self.boxes.values()]
        return min(xs), max(xs)

    def route(self, e: EdgeInfo) -> list[tuple[float, float]]:
        """Points of the line from e's source node to the bottom of its plot: straight,
        except that a forward connection passes each band it crosses vertically through its
        slot there, and each node row it crosses at least NODE_CLEAR away from the nodes."""
        (xa, ya), (bx, by) = self.nodes[e.src], self.boxes[e]
        points = [(xa, ya + NODE_R)]
        for x, yb in self.waypoints[e]:
            points += [(x, yb - BOX_H / 2), (x, yb + BOX_H / 2)]
        points.append((bx, by - BOX_H / 2))
        out = [points[0]]
        for (x0, y0), (x1, y1) in zip(points[:-1], points[1:], strict=True):
            rows = sorted({y for _, y in self.nodes.values() if y0 < y < y1})
            for y in rows:
                x = x0 + (y - y0) / (y1 - y0) * (x1 - x0)
                for xn, yn in self.nodes.values():
                    if yn == y and abs(x - xn) < NODE_CLEAR:
                        x = xn + NODE_CLEAR * (1 if x >= xn else -1)
                out.append((x, y))
            out.append((x1, y1))
        return out


def _layout(model: GatedKAN, shown: list[EdgeInfo]) -> Layout:
    """Node positions, plot centres and forward-connection waypoints.

    Rows: x^(0) at the bottom, x^(l) in row l, exit k's outputs in row k+1 (right of the
    trunk; the final exit centred). Each stage's plots sit in one band between its rows,
    near where the straight edge would cross the band, spread so that none overlap. A
    forward connection from row j to band k > j also takes a narrow slot in the bands
    j .. k-1 it crosses (a dummy vertex, as in layered graph drawing), so it runs between
    the plots of those bands, not through them. Bands are placed from the top down, so a
    slot's ideal position is on the line to the (already placed) point above it."""
    L, width = model.L, model.width
    per_band = [sum(e.stage == k for e in shown) + sum(e.src[1] <= k < e.stage for e in shown) * 0.3 for k in range(L)]
    widest = max([*per_band, 1])
    node_gap = max(1.25, widest * SLOT / max(max(width[:L]), 1))
    pos: dict[NodeKey, tuple[float, float]] = {}
    right = 0.0
    for layer in range(L):
        n = width[layer]
        for i in range(n):
            pos[("x", layer, i)] = ((i - (n - 1) / 2) * node_gap, layer * ROW)
        right = max(right, (n - 1) / 2 * node_gap)
    exit_gap = max(node_gap, 1.6)
    for k in range(L):
        if not model.head_out[k]:
            continue
        n = model.n_out
        for p in range(n):
            x = (p - (n - 1) / 2) * node_gap if k == L - 1 else right + exit_gap + p * node_gap * 0.8
            pos[("y", k, p)] = (x, (k + 1) * ROW)

    boxes: dict[EdgeInfo, tuple[float, float]] = {}
    waypoints: dict[EdgeInfo, list[tuple[float, float]]] = {e: [] for e in shown}
    for k in reversed(range(L)):
        y_band = (k + 0.5) * ROW
        items = []  # ((ideal x, tie-breakers), width, edge, is_box)
        for e in shown:
            if e.stage == k:
                above, is_box = pos[e.dst], True
            elif e.src[1] <= k < e.stage:
                above, is_box = (waypoints[e][0] if waypoints[e] else boxes[e]), False
            else:
                continue
            (xs, ys), (xa, ya) = pos[e.src], above
            t = (y_band - ys) / (ya - ys)
            items.append(((xs + t * (xa - xs), xa, xs), BOX_W if is_box else DUMMY_W, e, is_box))
        items.sort(key=lambda it: it[0])
        xs_new = _spread([it[0][0] for it in items], [it[1] for it in items], SLOT - BOX_W)
        for (_, _, e, is_box), x in zip(items, xs_new, strict=True):
            if is_box:
                boxes[e] = (x, y_band)
            else:
                waypoints[e].insert(0, (x, y_band))
    return Layout(pos, boxes, waypoints)
