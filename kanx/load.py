"""Load a finished run: its record, its config and its trained model, ready to predict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from kanx import records as R
from kanx.kan.network import GatedKAN


@dataclass
class TrainedRun:
    record: dict
    config: dict
    model: GatedKAN  # a single member (M = 1)
    scaling: object  # kanx.data.Scaling fitted on the run's training data
    gate_estimator: str = "threshold"
    input_names: tuple = ()
    output_names: tuple = ()

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Predictions in the data's original units for raw inputs x (N, n_inputs)."""
        x = torch.as_tensor(x, dtype=torch.float64)
        scaled = self.scaling.x(x).unsqueeze(0).to(torch.float32)  # (1, N, n_0)
        return self.scaling.y_inverse(self.model.predict(scaled, self.gate_estimator)[0].to(torch.float64))

    def formula(self, **options):
        """The run's symbolic formula (kanx.formula.formula_of_run; options: tolerance,
        simplicity, primitives)."""
        from kanx.formula import formula_of_run

        return formula_of_run(self, **options)


def load_run(run_dir: str | Path) -> TrainedRun:
    """The record, the resolved config and the trained model of a finished run."""
    run_dir = Path(run_dir)
    state = R.read_state(run_dir)
    if state.record is None or not (run_dir / R.MODEL).exists():
        raise FileNotFoundError(f"{run_dir} holds no finished run (expected {R.RECORD}, {R.DONE} and {R.MODEL})")
    saved = torch.load(run_dir / R.MODEL, map_location="cpu", weights_only=False)
    model = GatedKAN(saved["spec"], saved["condition"], seeds=[saved["seed"]])
    model.load_state_dict({k: v.unsqueeze(0) for k, v in saved["model"].items()})
    model.eval()
    return TrainedRun(state.record, state.record["config"], model, saved["scaling"], saved["gate_estimator"], saved["input_names"], saved["output_names"])
