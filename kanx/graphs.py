"""The training step on static buffers, replayed as a CUDA graph (`train.cuda_graph=true`).

On a GPU these small networks cost their kernel launches, not their arithmetic: about 145
steps/s whatever the pack size (docs/BENCHMARK.md, "On a GPU"). A CUDA graph records one
step (gates, forward, loss, backward, the member freeze and Adam) once and replays it with
a single launch. For that the step reads everything that changes between steps from
buffers at fixed addresses (the minibatch, the uniform noise, beta and tau_x, which members
are alive), makes no host sync, and Adam keeps its step count on the device
(kanx.optim.Adam.step_capturable). Minibatch order and noise are still drawn on the host
from each member's own generator, once per epoch, and copied into the buffers, so a
member's draws do not change. What is outside the graph stays outside: grid updates
(which write the grid and coefficients in place, where the graph reads them), the
per-epoch divergence check, evaluation and checkpoints.

One graph per (batch size, forward connections on/off): the last batch of an epoch may be
partial, and the FC switch changes which edges exist. Capturing needs warm-up steps; they
run on a copy of the state, which is then restored, so capture leaves the trajectory
untouched. Without CUDA (`capture=False`) the same step runs eagerly on the same buffers:
that is how the CPU tests check this path against the ordinary one.
"""

from __future__ import annotations

import torch

from kanx.kan.objective import complexity, data_loss, total_loss

WARMUP_STEPS = 3  # before a capture: lazy initialization and torch.compile's first call


class StaticSteps:
    def __init__(self, pack, capture: bool):
        self.pack, self.capture = pack, capture
        device, M = pack.device, pack.M
        self.beta = torch.zeros(M, device=device)
        self.tau = torch.ones((), device=device)
        self.alive = torch.ones(M, dtype=torch.bool, device=device)
        self.epoch_loss = torch.zeros(M, device=device)
        self.epoch_data = torch.zeros(M, device=device)
        self.buffers: dict[int, tuple[torch.Tensor, ...]] = {}
        self.graphs: dict[tuple[int, bool], torch.cuda.CUDAGraph] = {}
        pack.optimizer.make_capturable(device)

    def begin_epoch(self, beta: torch.Tensor, tau: float, alive: torch.Tensor) -> None:
        self.beta.copy_(beta)
        self.tau.fill_(tau)
        self.alive.copy_(alive)
        self.epoch_loss.zero_()
        self.epoch_data.zero_()

    def step(self, xb: torch.Tensor, yb: torch.Tensor, u: torch.Tensor) -> None:
        B = xb.shape[1]
        if B not in self.buffers:
            self.buffers[B] = (torch.empty_like(xb), torch.empty_like(yb), torch.empty_like(u))
        for buf, value in zip(self.buffers[B], (xb, yb, u), strict=True):
            buf.copy_(value)
        if not self.capture:
            self.pack.optimizer.zero_grad(set_to_none=True)
            self._step(*self.buffers[B])
            return
        key = (B, self.pack.model.fc_enabled)
        if key not in self.graphs:
            self.graphs[key] = self._capture(self.buffers[B])
        self.graphs[key].replay()

    def _step(self, xb: torch.Tensor, yb: torch.Tensor, u: torch.Tensor) -> None:
        """One step of Trainer.run_epoch on the buffers, with no host sync."""
        pack, model = self.pack, self.pack.model
        n_gate = model.n_edges if pack.condition.edge_gates else 0
        gates = model.sample_gates(u[:, :n_gate] if n_gate else None)
        out = model(xb, gates)
        eta = model.exit_weights(u[:, n_gate:], self.tau)
        loss = data_loss(out, yb, eta)
        self.epoch_data += loss.detach()
        if pack.condition.edge_gates or pack.condition.exits:
            with_lc = total_loss(loss, complexity(model, pack.costs, pack.exit_tau(self.tau)), self.beta, pack.scale)
            loss = torch.where(pack.uses_lc, with_lc, loss) if model.mixed else with_lc
        loss.sum().backward()
        for p in pack.optimizer.param_groups[0]["params"]:
            if p.grad is not None:  # a diverged member is frozen (NaN-safe, unlike a product)
                alive = self.alive.view(-1, *[1] * (p.dim() - 1))
                p.grad.copy_(torch.where(alive, p.grad, torch.zeros_like(p.grad)))
        pack.optimizer.step_capturable()
        self.epoch_loss += loss.detach()

    def _mutable_state(self) -> list[torch.Tensor]:
        """Every tensor a step writes: parameters, Adam's moments and step, the epoch loss."""
        opt = self.pack.optimizer
        tensors = [p.data for p in opt.param_groups[0]["params"]]
        tensors += [s[k] for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq")]
        return [*tensors, opt._shared_step, self.epoch_loss, self.epoch_data]

    def _capture(self, buffers: tuple[torch.Tensor, ...]) -> torch.cuda.CUDAGraph:
        state = self._mutable_state()
        saved = [t.clone() for t in state]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_STEPS):
                self.pack.optimizer.zero_grad(set_to_none=True)
                self._step(*buffers)
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            for t, s in zip(state, saved, strict=True):
                t.copy_(s)
        graph = torch.cuda.CUDAGraph()
        self.pack.optimizer.zero_grad(set_to_none=True)  # backward allocates grads from the graph's pool
        with torch.cuda.graph(graph):
            self._step(*buffers)
        return graph
