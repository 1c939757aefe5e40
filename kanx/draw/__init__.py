"""Draw a trained gated KAN as in the paper's Fig. 1.

    python -m kanx.draw RUN_DIR [--out FILE_STEM] [--formats png,pdf,svg] [--show-closed]
    fig, drawing = kanx.draw.draw_run(run_dir_or_trained_run)  # notebooks: the figure and what it shows
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
(dataset name, data seed and options); if the data cannot be loaded, or no longer matches
the scaling saved with the model, each edge is drawn over its spline grid's range instead
and the drawing says so.

The package, by job: graph.py (each edge of the trained member and its role, from
kanx.kan.structure's trace; what is drawn), values.py (node ranges and edge curves, from the
model), layout.py (where nodes and plots go), render.py (matplotlib: one run, a grid of
runs, files), command.py (``python -m kanx.draw``, ``kanx-draw``).
"""

from .command import main
from .graph import Drawing, EdgeInfo, plan
from .layout import Layout
from .render import COLORS, FORMATS, MAX_PLOTS, draw_grid, draw_run, save
from .values import edge_curves, node_ranges

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
