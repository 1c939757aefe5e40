"""Training of a pack: M runs that share the training protocol (shapes, epochs, batch size,
warmups), trained as one batched GatedKAN. Members may differ in condition, beta, seed and
dataset (a *mixed* pack); each follows its own condition's schedule and objective. A single
run is a pack of one.

Protocol of the paper's "Training and inference" and Methods "Experimental details":
Adam (lr 1e-3, no weight decay) on coefficients and gates; minibatches; beta = 0 until the
warmup ends (egates present and sampled); forward connections off for the FC warmup; the
exit-gate temperature annealed exponentially from 5.0 to 0.1; bursts of 10 grid updates,
5 epochs apart, at training start, FC activation and beta onset; no early stopping.

Member m draws its initialization from its own seed's generator, and its minibatch orders,
gate noise and Gumbel noise from counter-based draws keyed by its seed (kanx.noise), in its
own condition's layout: it follows the same trajectory packed or alone, and resumes exactly
with no generator state to carry.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kanx import compiling, heap, noise
from kanx.config import RunConfig, TrainConfig
from kanx.kan.members import StepNoise
from kanx.kan.network import Condition, GatedKAN
from kanx.kan.objective import Costs, complexity, complexity_scale, data_loss, total_loss
from kanx.kan.structure import model_structure
from kanx.optim import Adam

if TYPE_CHECKING:
    from kanx.epoch_graph import EpochGraph

# ------------------------------------------------------------------ schedules


def beta_active(epoch: int, warmup: int) -> bool:
    """Complexity pressure is off during the warmup."""
    return epoch >= warmup


def beta_acts(condition: Condition) -> bool:
    """Beta acts through L_C only where it has gates to act on (Condition.beta_acts)."""
    return condition.beta_acts


def warmup_applies(condition: Condition, warmup_for: str) -> bool:
    """Whether the warmup holds a condition's beta at 0: every condition where beta acts
    (``all``, the default), or only those with egates (``egates``: the Methods' "For
    conditions with egates, no complexity pressure was exerted during warmup" read
    literally, so X and FX feel beta from epoch 0)."""
    return beta_acts(condition) and (warmup_for == "all" or condition.edge_gates)


def fc_active(epoch: int, fc_warmup: int) -> bool:
    """Forward connections are off during the FC warmup."""
    return epoch >= fc_warmup


def tau_x(epoch: int, epochs: int, start: float = 5.0, end: float = 0.1) -> float:
    """Exit-gate temperature, exponential from ``start`` at epoch 0 to ``end`` at epoch
    ``epochs`` - 1, and ``end`` from there on."""
    return start * (end / start) ** (min(epoch, epochs - 1) / max(epochs - 1, 1))


def grid_update_epochs(train: TrainConfig, condition: Condition) -> frozenset[int]:
    """Epochs that begin with a grid update: a burst of ``grid_update_count`` updates,
    ``grid_update_every`` epochs apart, at training start, at FC activation (with F) and
    at beta onset (where beta acts: Condition.beta_acts, when the warmup applies to the condition).
    Empty when grid updates are off."""
    if not train.grid_updates:
        return frozenset()
    starts = [0]
    if condition.forward:
        starts.append(train.fc_warmup)
    if warmup_applies(condition, train.warmup_for):
        starts.append(train.warmup)
    return frozenset(s + i * train.grid_update_every for s in starts for i in range(train.grid_update_count)
                     if s + i * train.grid_update_every < train.epochs)


def describe_device(device: torch.device) -> str:
    """What a record says it trained on: 'cpu', or 'cuda' with the card's name."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


# ------------------------------------------------------------------ the pack

MAX_CHUNK = 500  # epochs a whole-epoch graph runs between host reads, at most (the log's rows)


@dataclass
class Progress:
    """What a pack reports to its caller after each epoch."""

    epoch: int
    loss: torch.Tensor  # (M,) mean training loss of the epoch
    alive: torch.Tensor  # (M,) bool
    data_loss: torch.Tensor | None = None  # (M,) mean data term L_data of the epoch


def member_grid_updates(train: TrainConfig, conditions: Sequence[Condition]) -> dict[int, torch.Tensor]:
    """Epoch -> bool (M,) of the members whose grid_update_epochs() include it."""
    schedule: dict[int, torch.Tensor] = {}
    for m, condition in enumerate(conditions):
        for epoch in grid_update_epochs(train, condition):
            schedule.setdefault(epoch, torch.zeros(len(conditions), dtype=torch.bool))[m] = True
    return schedule


def parameter_terms(model: GatedKAN, noise: StepNoise, tau: float | torch.Tensor, costs: Costs, tempered: bool,
                    with_lc: bool) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The sampled egates z~ (M, n_edges), the exit weights eta (M, L) or None without X, and L_C
    (M,) or None where beta acts on no member (``with_lc``), from the parameters and the step's
    ``noise`` ("Training and inference"): GatedKAN.sample_gates, GatedKAN.exit_weights at
    temperature ``tau``, and kanx.kan.objective.complexity (pi tempered by ``tau`` with ``tempered``,
    train.exit_pi)."""
    gates = model.sample_gates(noise.edges, noise.nodes)
    eta = model.exit_weights(noise.exits, tau)
    lc = complexity(model, costs, tau if tempered else None) if with_lc else None
    return gates, eta, lc


class Trainer:
    """The trainer of a pack: M runs trained together. Parameters, data and noise all carry
    the member axis."""

    def __init__(self, runs: Sequence[RunConfig], x_train: torch.Tensor, y_train: torch.Tensor,
                 n_train: int, device: torch.device):
        """x_train (M, N, n_0), y_train (M, N, n_L): each member's training data, already
        scaled for the model."""
        first = runs[0]
        assert all(r.pack_key() == first.pack_key() for r in runs), (
            "a pack holds runs that share the training protocol (RunConfig.pack_key)")
        self.runs, self.train_cfg = list(runs), first.train
        # train.compile: the epoch from which the pack trains compiled (None: eagerly throughout)
        self.compile_from = compiling.compiled_from(self.train_cfg, x_train.shape[1], device.type)
        self.compiled = self.compile_from == 0
        self.conditions = [r.condition for r in runs]
        self.device, self.M = device, len(runs)
        if device.type == "cpu":  # every step frees its large tensors: keep them for the next (kanx.heap)
            heap.keep_freed_memory()
        seeds = [r.seed for r in runs]
        self.model = GatedKAN(first.model, self.conditions, seeds).to(device)
        self.condition = self.model.condition  # the superset of the members' conditions
        self.model.use_compiled_basis(self.compiled)
        self.x, self.y = x_train.to(device, torch.float32), y_train.to(device, torch.float32)
        # L_C enters the loss only of members where beta acts (Condition.beta_acts: E, X, N, I, or a registered factor).
        self.uses_lc = torch.tensor([beta_acts(c) for c in self.conditions], device=device)
        # mdl_batch's n is the batch actually drawn: min(batch_size, n_train).
        self.scale = complexity_scale(self.train_cfg.complexity_scale, n_train, min(self.train_cfg.batch_size, n_train))
        self.costs, self.estimator = first.costs, first.gate_estimator
        self.optimizer = Adam(self.model.parameters(), lr=self.train_cfg.lr, fused=self.compiled
                              and device.type == "cpu")
        self.streams = noise.streams(noise.member_keys(seeds).to(device))
        self.alive = torch.ones(self.M, dtype=torch.bool)
        self.grid_epochs = member_grid_updates(self.train_cfg, self.conditions)
        self.epoch_graph: EpochGraph | None = None  # with train.cuda_graph
        self.epoch = 0  # the next epoch to run
        # full_state() at the last epoch boundary train() passed: what a signal checkpoints
        self.last_state: dict | None = None
        self.steps = 0
        self.train_seconds = 0.0
        self.resumed_train_seconds = 0.0  # train_seconds the checkpoints held: what earlier processes trained

    # ---------------------------------------------------------------- one epoch
    @property
    def batches_per_epoch(self) -> int:
        """Optimizer steps per epoch: minibatches of train.batch_size over the n_train samples
        (the last one partial)."""
        return math.ceil(self.x.shape[1] / self.train_cfg.batch_size)

    def betas_at(self, epoch: int) -> list[float]:
        """The beta in force for every member in an epoch: its own where beta acts (Condition.beta_acts),
        except in the warmup where that applies to it (warmup_applies); 0 otherwise."""
        on, cfg = beta_active(epoch, self.train_cfg.warmup), self.train_cfg
        return [r.beta if beta_acts(c) and (on or not warmup_applies(c, cfg.warmup_for)) else 0.0
                for r, c in zip(self.runs, self.conditions, strict=True)]

    def tau_at(self, epoch: int) -> float:
        """tau_x in an epoch: annealed over train.tau_x_epochs (null: the whole training)."""
        cfg = self.train_cfg
        return tau_x(epoch, cfg.tau_x_epochs or cfg.epochs, cfg.tau_x_start, cfg.tau_x_end)

    def exit_tau(self, tau):
        """The temperature of pi in L_C: tau_x with train.exit_pi=tempered, else None."""
        return tau if self.train_cfg.exit_pi == "tempered" else None

    def epoch_draws(self, epoch: int | torch.Tensor, n_batches: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Every member's minibatch order (M, N) and uniform noise (n_batches, M, n_noise) for
        an epoch, the noise in the slots of the model's member layout (members.noise_slots:
        [egate noise | exit noise], each member's draws at its own indices), as tensor
        operations on the pack's device (``epoch`` may be a device tensor: a CUDA graph's counter)."""
        compiled = self.compiled and self.device.type == "cpu"  # on a GPU they run in the epoch's graph
        return noise.epoch_draws(self.streams, epoch, self.x.shape[1], n_batches, self.model.members.noise_slots(),
                                 compiled)

    def shuffled(self, perm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every member's training data (M, N, n_0), (M, N, n_L) in its epoch order ``perm`` (M, N)."""
        x, y = (torch.gather(t, 1, perm.unsqueeze(-1).expand(-1, -1, t.shape[-1])) for t in (self.x, self.y))
        return x, y

    def run_epoch(self) -> Progress:
        """The next epoch: eagerly, or with train.cuda_graph as a chunk of one (run_epochs)."""
        if self.train_cfg.cuda_graph:
            return self.run_epochs(1)[0]
        self._compile_when_due()
        epoch, cfg, model = self.epoch, self.train_cfg, self.model
        model.fc_enabled = self.condition.forward and fc_active(epoch, cfg.fc_warmup)
        if epoch in self.grid_epochs:
            model.update_grid(self.x, self.alive & self.grid_epochs[epoch])
        beta = torch.tensor(self.betas_at(epoch), dtype=torch.float32, device=self.device)
        epoch_loss = torch.zeros(self.M, device=self.device)
        epoch_data = torch.zeros(self.M, device=self.device)
        self.epoch_steps(epoch, beta, self.tau_at(epoch), self.alive, epoch_loss, epoch_data)
        return self._finish_epoch(epoch_loss, epoch_data, self.batches_per_epoch)

    def _compile_when_due(self) -> None:
        """From the epoch train.compile=auto names (kanx.compiling.compiled_from), the compiled
        basis, draws, parameter terms and Adam update, as a pack compiled from the start uses them;
        a run resumed past that epoch compiles from its first."""
        if self.compiled or self.compile_from is None or self.epoch < self.compile_from:
            return
        self.compiled = True
        self.model.use_compiled_basis(True)
        self.optimizer.fused = self.device.type == "cpu"

    def epoch_steps(self, epoch: int | torch.Tensor, beta: torch.Tensor, tau: float | torch.Tensor, alive: torch.Tensor,
                    loss_sum: torch.Tensor, data_sum: torch.Tensor) -> None:
        """Every step of an epoch: its draws (kanx.noise) and shuffle, then one ``step`` per
        minibatch of train.batch_size (the last one partial), adding each step's L and L_data to
        ``loss_sum`` and ``data_sum`` (M,). The eager epoch (run_epoch) and the whole-epoch graph
        (kanx.epoch_graph) both run this: there ``epoch`` and ``tau`` are device tensors, the
        optimizer is capturable, and nothing here waits for the host."""
        bs, n_batches = self.train_cfg.batch_size, self.batches_per_epoch
        perm, noise = self.epoch_draws(epoch, n_batches)
        x, y = self.shuffled(perm)
        for b in range(n_batches):
            loss, data = self.step(x[:, b * bs : (b + 1) * bs], y[:, b * bs : (b + 1) * bs], noise[b], beta, tau, alive)
            loss_sum += loss
            data_sum += data

    def step(self, xb: torch.Tensor, yb: torch.Tensor, u: torch.Tensor, beta: torch.Tensor, tau: float | torch.Tensor,
             alive: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimizer step of every member ("Training and inference"), on its minibatch xb
        (M, B, n_0), yb (M, B, n_L) with the step's noise u (M, n_noise):

            L = L_data + beta * scale * L_C    (L_C only for the members where beta acts),

        L_data = sum_k eta_k MSE_k through sampled egates and exit weights (GatedKAN.sample);
        one backward (members share nothing, so each gets its own gradient); the members not
        ``alive`` (M,) frozen; Adam. ``beta`` (M,); ``tau`` the epoch's tau_x. Returns (L, L_data)
        (M,), detached."""
        model = self.model
        gates, eta, lc = self.parameter_terms(model.members.split_noise(u), tau)
        out = model(xb, gates)  # (M, E, B, P)
        data = data_loss(out, yb, eta)
        loss = data
        if lc is not None:
            with_lc = total_loss(data, lc, beta, self.scale)
            loss = torch.where(self.uses_lc, with_lc, data) if model.members.mixed else with_lc
        self.optimizer.zero_grad()
        loss.sum().backward()
        self._freeze(alive)
        self.optimizer.step()
        return loss.detach(), data.detach()

    def parameter_terms(self, noise: StepNoise, tau: float | torch.Tensor):
        """A step's terms that depend on the parameters and noise alone, not on the minibatch
        (``parameter_terms``): compiled as one function, forward and backward, on a CPU with
        train.compile, where eagerly they were some hundred small ops a step."""
        args = (self.costs, self.train_cfg.exit_pi == "tempered", self.condition.beta_acts)
        if self.compiled and self.device.type == "cpu":
            # a 0-d tensor, not a float: a float argument would recompile every epoch (eager ops round
            # their Python scalars to float32 alike)
            return compiling.static(parameter_terms)(self.model, noise, torch.as_tensor(tau, dtype=torch.float32),
                                                     *args)
        return parameter_terms(self.model, noise, tau, *args)

    def run_epochs(self, n: int) -> list[Progress]:
        """The next n epochs (fewer where training ends). Eagerly one by one; with
        train.cuda_graph as whole-epoch graphs (kanx.epoch_graph), in chunks that the host
        interrupts only where it must act: grid updates and the forward-connection switch."""
        end = min(self.epoch + n, self.train_cfg.epochs)
        if not self.train_cfg.cuda_graph:
            return [self.run_epoch() for _ in range(end - self.epoch)]
        progresses = []
        while self.epoch < end:
            progresses += self._graph_chunk(min(end, self._next_host_epoch()))
        return progresses

    def _next_host_epoch(self) -> int:
        """The first epoch after this one that the host must begin: a grid update, the FC
        switch, or the chunk's limit (the size of the graph's log)."""
        cfg, now = self.train_cfg, self.epoch
        stops = [cfg.epochs, now + MAX_CHUNK, *(e for e in self.grid_epochs if e > now)]
        if self.condition.forward and cfg.fc_warmup > now:
            stops.append(cfg.fc_warmup)
        return min(stops)

    def _graph_chunk(self, end: int) -> list[Progress]:
        """Epochs self.epoch .. end - 1 replayed with no host sync between them."""
        from kanx.epoch_graph import EpochGraph

        first, cfg, model = self.epoch, self.train_cfg, self.model
        model.fc_enabled = self.condition.forward and fc_active(first, cfg.fc_warmup)
        if first in self.grid_epochs:
            model.update_grid(self.x, self.alive & self.grid_epochs[first])
        if self.epoch_graph is None:
            self.epoch_graph = EpochGraph(self, capture=self.device.type == "cuda", max_chunk=MAX_CHUNK)
        loss, data, alive = self.epoch_graph.run(first, end - first, self.alive.to(self.device))
        n = self.batches_per_epoch
        self.alive = alive[-1].clone()
        self.steps += n * (end - first)
        self.epoch = end
        return [Progress(first + i, loss[i] / n, alive[i].clone(), data[i] / n) for i in range(end - first)]

    def _finish_epoch(self, epoch_loss: torch.Tensor, epoch_data: torch.Tensor, n_batches: int) -> Progress:
        epoch = self.epoch
        self.steps += n_batches
        self.epoch += 1
        self._check_divergence(epoch_loss)
        return Progress(epoch, epoch_loss / n_batches, self.alive.clone(), epoch_data / n_batches)

    def _check_divergence(self, epoch_loss: torch.Tensor) -> None:
        """A member whose loss turned non-finite is frozen from now on (one host sync per
        epoch, not per step); the others carry on untouched."""
        newly = ~torch.isfinite(epoch_loss).cpu() & self.alive
        if newly.any():
            self.alive &= ~newly
            self.zero_moments(newly.to(self.device))

    @torch.no_grad()
    def zero_moments(self, members: torch.Tensor) -> None:
        """Zero the Adam moments of ``members`` (bool (M,), on the device): zero moments give zero
        updates, so a diverged member stays where it is. No host sync (a CUDA graph runs it too)."""
        for state in self.optimizer.state.values():
            for key in ("exp_avg", "exp_avg_sq"):
                m = state[key]
                m.copy_(torch.where(members.view(-1, *[1] * (m.dim() - 1)), torch.zeros_like(m), m))

    def _freeze(self, alive: torch.Tensor) -> None:
        """Zero the gradients of the members not ``alive``, so a diverged member stays where it
        is. With a capturable optimizer (the epoch graph) every step masks, on the device and
        NaN-safe (unlike a product); eagerly only once a member has diverged."""
        if self.optimizer.capturable:
            for p in self.optimizer.param_groups[0]["params"]:
                p.grad.copy_(torch.where(alive.view(-1, *[1] * (p.dim() - 1)), p.grad, torch.zeros_like(p.grad)))
        elif not alive.all():
            dead = (~alive).to(self.device)
            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad[dead] = 0.0

    # ---------------------------------------------------------------- train / evaluate
    def train(self, on_epoch: Callable[[Trainer, Progress], None] | None = None,
              host_every: Sequence[int] = ()) -> None:
        """Train to the end, calling ``on_epoch`` after every epoch with ``self.epoch`` the
        epochs finished. With train.cuda_graph the epochs run in chunks, and the model is the
        one of a chunk's end: ``host_every`` (epochs) are the caller's cadences at which it
        reads the model (curve rows, checkpoints), where a chunk ends. ``last_state`` is
        always the state at the end of an epoch the callback has seen (what a signal saves)."""
        start = time.perf_counter() - self.train_seconds
        while self.epoch < self.train_cfg.epochs:
            if self.train_cfg.cuda_graph:
                progresses = self.run_epochs(
                    min((self.epoch // k + 1) * k for k in (*host_every, MAX_CHUNK) if k) - self.epoch)
            else:
                progresses = [self.run_epoch()]
            self.train_seconds = time.perf_counter() - start
            state, end = self.full_state(), self.epoch
            for progress in progresses:
                self.epoch = progress.epoch + 1
                if self.epoch == end:
                    self.last_state = state
                if on_epoch is not None:
                    on_epoch(self, progress)
        self.model.fc_enabled = self.condition.forward

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Inference on model-scaled inputs (M, N, n_0) -> (M, N, n_L)."""
        return self.model.predict(x.to(self.device, torch.float32), self.estimator)

    def structures(self) -> list[dict]:
        return [s.as_dict() for s in model_structure(self.model, self.estimator)]

    # ---------------------------------------------------------------- member state
    def full_state(self) -> dict:
        """A copy of everything needed to resume the pack exactly, taken at an epoch
        boundary (cheap: a few dozen small tensors)."""
        opt = {}
        for i, p in enumerate(self.optimizer.param_groups[0]["params"]):
            st = self.optimizer.state.get(p)
            if st:
                opt[i] = {k: v.detach().clone() for k, v in st.items()}
        return {
            "epoch": self.epoch,
            "steps": self.steps,
            "train_seconds": self.train_seconds,
            "alive": self.alive.clone(),
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "optimizer": opt,
        }

    def member_state(self, m: int) -> dict:
        """Member m's slice of the state now."""
        return self.member_slice(self.full_state(), m)

    def member_model_state(self, m: int) -> dict[str, torch.Tensor]:
        """Member m's model state now, as a model of its own condition with M = 1 would hold it."""
        return self.model.members.member_state_dict(self.model.state_dict(), m)

    def member_slice(self, state: dict, m: int) -> dict:
        """Member m's slice of a full_state(), in the layout of a model of its own condition
        (what its checkpoint file holds, so it resumes in a pack of any make-up; the layout's
        checkpoint_part)."""
        names = [n for n, _ in self.model.named_parameters()]
        part = self.model.members.checkpoint_part(state["model"], names, state["optimizer"], m)
        return {
            "epoch": state["epoch"],
            "steps": state["steps"],
            "train_seconds": state["train_seconds"],
            "alive": bool(state["alive"][m]),
            **part,
        }

    def load_member_states(self, checkpointed: Sequence[dict | None]) -> None:
        """Resume from per-member checkpoints (member_slice) taken at the same epoch."""
        states = [s for s in checkpointed if s is not None]
        if len(states) < len(checkpointed):
            missing = len(checkpointed) - len(states)
            raise ValueError(f"{missing} of {len(checkpointed)} checkpoints hold no trainer state to resume from")
        epochs = {s["epoch"] for s in states}
        assert len(epochs) == 1, f"members of a pack resume from one epoch, got {sorted(epochs)}"
        params = self.optimizer.param_groups[0]["params"]
        self.model.members.load_checkpoint_parts(self.model, self.optimizer.state, params, states)
        self.alive = torch.tensor([s["alive"] for s in states])
        self.epoch, self.steps = states[0]["epoch"], states[0]["steps"]
        self.train_seconds = self.resumed_train_seconds = max(s["train_seconds"] for s in states)
        self.model.fc_enabled = self.condition.forward and fc_active(self.epoch, self.train_cfg.fc_warmup)

