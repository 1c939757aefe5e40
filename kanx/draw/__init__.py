"""Draw a trained gated KAN as in the paper's Fig. 1.

    python -m kanx.draw RUN_DIR [--out FILE_STEM] [--formats png,pdf,svg] [--show-closed]
    fig, drawing = kanx.draw.draw_run(run_dir_or_trained_run)  # notebooks: the figure and what it shows
    kanx.load_run(run_dir).draw(ax=None)  # the same drawing from a loaded run: its Figure
    kanx.analyze.select.draw_median_models(records_root, dataset, out_dir)  # median-seed model per condition

What is drawn (paper, "Gated multi-exit architecture" and Methods "Evaluation measures"):
nodes by layer, inputs at the bottom (labelled with the dataset's input names), each exit's
output(s) with the output names; every *contributing* edge as a small plot of what it adds
to its destination, z * phi(x) (inference gate included), over the range its source node
took on the run's training inputs. Which edges contribute comes from the same
backward-forward trace that counts them (kanx.kan.structure.edge_roles): edges on
input-output paths are solid; bias terms (connected to an output but off every path) are
dashed and labelled "bias" (one label per merged component); closed and non-contributing
edges are hidden, or faint lines with ``show_closed``. Forward-connection edges are
orange, exit heads blue, with the exit gate's probabilities pi at each exit and the
selected exit (argmax pi) ringed.

Node ranges come from running the model on the training inputs, rebuilt from the record
(dataset name, data seed and options; kanx.load.drawing_inputs); if the data cannot be
loaded, or no longer matches the scaling saved with the model, each edge is drawn over its
spline grid's range instead and the drawing says so.

This package is the front end that loads: runs.py (a run folder or a TrainedRun, its
training inputs rebuilt, handed to the engine), command.py (``python -m kanx.draw``,
``kanx-draw``). The drawing itself is kanx.diagram, which reads nothing from disk (the
graph, node ranges and edge curves, layout, matplotlib); TrainedRun.draw calls it directly.
"""

from kanx.diagram import COLORS, FORMATS, MAX_PLOTS, Drawing, EdgeInfo, Layout, edge_curves, save

from .command import main
from .runs import draw_grid, draw_run, node_ranges, plan

__all__ = [
    "COLORS",
    "FORMATS",
    "MAX_PLOTS",
    "Drawing",
    "EdgeInfo",
    "Layout",
    "draw_grid",
    "draw_run",
    "edge_curves",
    "main",
    "node_ranges",
    "plan",
    "save",
]
