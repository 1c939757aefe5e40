"""Whole epochs on static buffers, replayed as CUDA graphs (`train.cuda_graph=true`).

On a GPU these small networks cost their kernel launches, not their arithmetic, and a pack
stepped from the host advances at the host's pace (docs/BENCHMARK.md, "On a GPU"). Here one
CUDA graph holds a whole epoch: the epoch's draws (kanx.noise, keyed by an epoch counter on
the device), the shuffle, every step (gates, forward, loss, backward, the member freeze and
Adam), the divergence check and the epoch's losses written to a log on the device. The host
replays it once per epoch without waiting, and reads the log at the end of a *chunk*: the
epochs between the points where it must act (grid updates, the forward-connection switch,
curve rows, checkpoints, progress lines; Trainer.train chooses them).

For that an epoch reads everything that changes from buffers at fixed addresses: the epoch
counter, beta before and after the warmup, tau_x of the chunk's epochs, which members are
alive; Adam keeps its step count on the device (kanx.optim.Adam.step_capturable). Grid
updates write the grid and coefficients in place, outside the graph, where it reads them.

An epoch here is Trainer.epoch_steps, the eager epoch's own steps (Trainer.step), run on
these buffers with Adam in its capturable form: the graph holds no second copy of the
training step, and reads the pack through its public methods only.

One graph per forward-connection state (the switch changes which edges exist). Capturing
needs a warm-up epoch; it runs on a copy of the state, which is then restored, so capture
leaves the trajectory untouched. Without CUDA (`capture=False`) the same epoch runs eagerly
on the same buffers: that is how the CPU tests check this path against the ordinary one.
"""

from __future__ import annotations

import torch


class EpochGraph:
    def __init__(self, pack, capture: bool, max_chunk: int):
        self.pack, self.capture = pack, capture
        device, M, cfg = pack.device, pack.M, pack.train_cfg
        self.epoch = torch.zeros((), dtype=torch.int64, device=device)  # the epoch the next replay runs
        self.slot = torch.zeros((), dtype=torch.int64, device=device)  # its row in the chunk's log
        before, after = pack.betas_at(0), pack.betas_at(cfg.epochs)  # beta is a step function of the warmup
        self.beta_before = torch.tensor(before, dtype=torch.float32, device=device)
        self.beta_after = torch.tensor(after, dtype=torch.float32, device=device)
        self.tau = torch.ones(max_chunk, device=device)  # tau_x of the chunk's epochs, by slot
        self.alive = torch.ones(M, dtype=torch.bool, device=device)
        self.epoch_loss = torch.zeros(M, device=device)
        self.epoch_data = torch.zeros(M, device=device)
        self.log_loss = torch.zeros(max_chunk, M, device=device)
        self.log_data = torch.zeros(max_chunk, M, device=device)
        self.log_alive = torch.zeros(max_chunk, M, dtype=torch.bool, device=device)
        self.graphs: dict[bool, torch.cuda.CUDAGraph] = {}
        pack.optimizer.make_capturable(device)  # static gradients, the step counter on the device

    def run(self, first: int, n: int, alive: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Epochs first .. first + n - 1, with no host sync between them. Returns each
        epoch's summed loss, summed data loss and alive members, (n, M) each, on the CPU."""
        self.epoch.fill_(first)
        self.slot.zero_()
        self.tau[:n].copy_(torch.tensor([self.pack.tau_at(first + i) for i in range(n)], dtype=torch.float32))
        self.alive.copy_(alive)
        key = self.pack.model.fc_enabled
        for _ in range(n):
            if not self.capture:
                self._epoch()
                continue
            if key not in self.graphs:
                self.graphs[key] = self._capture()
            self.graphs[key].replay()
        return self.log_loss[:n].cpu(), self.log_data[:n].cpu(), self.log_alive[:n].cpu()

    def _epoch(self) -> None:
        """One epoch on the buffers (Trainer.epoch_steps, as the eager epoch runs it), with no host sync."""
        pack = self.pack
        tau = self.tau.index_select(0, self.slot.view(1)).view(())
        beta = torch.where(self.epoch >= pack.train_cfg.warmup, self.beta_after, self.beta_before)
        self.epoch_loss.zero_()
        self.epoch_data.zero_()
        pack.epoch_steps(self.epoch, beta, tau, self.alive, self.epoch_loss, self.epoch_data)
        self._end_epoch()

    @torch.no_grad()
    def _end_epoch(self) -> None:
        """Trainer._check_divergence on the device: a member whose loss turned non-finite is
        frozen from the next epoch on, its Adam moments zeroed; then the epoch is logged."""
        newly = ~torch.isfinite(self.epoch_loss) & self.alive
        self.alive &= ~newly
        self.pack.zero_moments(newly)
        row = self.slot.view(1)
        self.log_loss.index_copy_(0, row, self.epoch_loss.view(1, -1))
        self.log_data.index_copy_(0, row, self.epoch_data.view(1, -1))
        self.log_alive.index_copy_(0, row, self.alive.view(1, -1))
        self.slot += 1
        self.epoch += 1

    def _mutable_state(self) -> list[torch.Tensor]:
        """Every tensor an epoch writes: parameters, Adam's moments and step, the counters, logs."""
        return [*self.pack.optimizer.state_tensors(), self.epoch, self.slot, self.alive,
                self.epoch_loss, self.epoch_data, self.log_loss, self.log_data, self.log_alive]

    def _capture(self) -> torch.cuda.CUDAGraph:
        state = self._mutable_state()
        saved = [t.clone() for t in state]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._epoch()  # lazy initialization and torch.compile's first call, outside the capture
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            for t, s in zip(state, saved, strict=True):
                t.copy_(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._epoch()
        return graph
