"""The drawing of a trained gated KAN (the paper's Fig. 1), from the model alone: the engine
behind ``kanx.draw`` and ``TrainedRun.draw``.

It reads nothing from disk: the caller hands it the trained run (the model, its gate
estimator, input and output names and record: graph.Run, which kanx.load.TrainedRun is) and
the run's training inputs as the model takes them (scaled, (N, n_0)), over which each
node's range is taken; without them (None) each edge is drawn over its spline grid's range,
and the drawing says so. kanx.draw (a run folder or a TrainedRun, the command line) and
TrainedRun.draw load the run and rebuild those inputs (kanx.load.drawing_inputs), then call
draw() here; nothing here imports kanx.load or kanx.draw, which import it.

By job: graph.py (each edge of the trained member and its role, from kanx.kan.structure's
trace; what is drawn: plan), values.py (node ranges and edge curves, from the model),
layout.py (where nodes and plots go), render.py (matplotlib: one run, a grid of runs, files).
"""

from .graph import Drawing, EdgeInfo, Run, plan
from .layout import Layout
from .render import COLORS, FORMATS, MAX_PLOTS, draw, draw_panels, save
from .values import edge_curves, node_ranges

__all__ = [
    "COLORS",
    "FORMATS",
    "MAX_PLOTS",
    "Drawing",
    "EdgeInfo",
    "Layout",
    "Run",
    "draw",
    "draw_panels",
    "edge_curves",
    "node_ranges",
    "plan",
    "save",
]
