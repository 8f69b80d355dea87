"""PyTorch front end of sgp's gossip engine: decentralized training by Stochastic Gradient Push
for any ``torch.nn.Module``, in the style of DistributedDataParallel.

    import sgp.torch
    model = sgp.torch.GossipDataParallel(Net())      # instead of DDP(Net()); reads RANK, SGP_*
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for images, labels in shard:                      # this rank's part of the data
        loss = loss_fn(model(images), labels)
        optimizer.zero_grad(); loss.backward(); optimizer.step()
        model.gossip(loss)                            # after every optimizer step
    model.finish(evaluate)                            # records, and the average model's accuracy

What it does:
- The module's parameters are laid out in one flat, contiguous float32 tensor and become views
  into it (``GossipDataParallel.flat``); the optimizer, created before or after, steps them as
  usual. They hold this rank's de-biased parameters z = x / w: training, evaluation and the
  module's own ``state_dict`` see z, and the engine keeps w (``Gossip.step``).
- ``gossip()`` hands the flat tensor to ``sgp._native.Gossip.step`` after each optimizer step;
  the engine runs a round when its schedule says so (``gossip_every``) and mixes in place (the
  tensor is attached to the engine: no copies per round).
- Buffers (batch norm's running statistics, counters) are not gossiped: each rank keeps its own,
  as DDP with ``broadcast_buffers=False`` does. The average model of ``finish()`` averages them.
- Started by ``sgp launch ... -- COMMAND``, it reads its rank and the run's settings from the
  environment and writes the same records as a C++ peer (``sgp.run``): peer-<rank>.jsonl,
  peer-<rank>-summary.json, snapshots for the launcher's consensus monitor at evaluation points,
  and at the end each rank's model (peer-<rank>-model.pt) and, from rank 0, the average model
  (model-average.pt) and its evaluation (average-model-evaluation.json), which the launcher puts
  into summary.json.
- CPU tensors go through the CPU backend; CUDA tensors only where sgp was built with CUDA (the
  native module refuses them otherwise, saying so).
"""
import contextlib
import copy
import os
import time

import torch

from sgp import _native
from sgp.run import RunRecords, launch_settings, write_json_atomically

# How long rank 0 waits, at the end, for the other ranks' final models (peers excluded by asgp
# are not waited for).
FINAL_MODELS_TIMEOUT_S = 120.0


def flatten_parameters(module):
    """Moves every parameter of `module` into one contiguous float32 tensor (returned) and makes
    each parameter a view into it, in ``module.parameters()`` order."""
    params = list(module.parameters())
    if not params:
        raise ValueError("sgp.torch: the module has no parameters to gossip")
    for name, p in module.named_parameters():
        if p.dtype != torch.float32:
            raise TypeError(f"sgp.torch: parameter {name} is {p.dtype}; sgp gossips float32 "
                            "parameters (call module.float() first)")
        if p.device != params[0].device:
            raise ValueError(f"sgp.torch: parameter {name} is on {p.device}, others on "
                             f"{params[0].device}: put the whole module on one device first")
    flat = torch.empty(sum(p.numel() for p in params), dtype=torch.float32,
                       device=params[0].device)
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            flat[offset:offset + n].copy_(p.reshape(-1))
            p.data = flat[offset:offset + n].view_as(p)
            offset += n
    return flat


def _make_gossip(numel, topology, rank, settings, run_dir, monitor, keys):
    if topology is None:
        if "RANK" not in os.environ:
            raise ValueError("sgp.torch: give topology= and rank=, or start the program with "
                             "sgp launch --topology FILE -- COMMAND (which sets RANK and SGP_*)")
        return _native.Gossip.from_env(numel)
    if rank is None:
        raise ValueError("sgp.torch: topology= needs rank= too")
    return _native.Gossip(topology, rank, numel, settings, run_dir=run_dir, monitor=monitor,
                          keys=keys)


class GossipDataParallel(torch.nn.Module):
    """Wraps `module` for decentralized training; ``forward`` is the module's.

    topology, rank, settings (config.json keys: algo, self_weight, gossip_every, ...), run_dir,
    monitor, keys: as ``sgp._native.Gossip``; left out, everything comes from the environment
    ``sgp launch`` sets. log_every / iterations_per_epoch / batch_size: for the records
    (log_every defaults to the run's setting); the records are written only with a run
    directory (SGP_RUN_DIR or run_dir).
    """

    def __init__(self, module, *, topology=None, rank=None, settings=None, run_dir=None,
                 monitor=None, keys=None, iterations_per_epoch=None, batch_size=None,
                 log_every=None):
        super().__init__()
        self.module = module
        self.flat = flatten_parameters(module)
        self._views = [p.data_ptr() for p in module.parameters()]
        self.engine = _make_gossip(self.flat.numel(), topology, rank, settings, run_dir,
                                   monitor, keys)
        # The flat buffer lives as long as the wrapper: the engine mixes it in place, without
        # copying it into its own x and back each round.
        self.engine.attach(self.flat)
        run_dir = run_dir or os.environ.get("SGP_RUN_DIR")
        run_settings = {**launch_settings(), **(settings or {})}
        self.batch_size = batch_size or run_settings.get("batch_size", 0)
        self.lr = None
        self.records = None
        self.run_dir = run_dir
        if run_dir:
            self.records = RunRecords(run_dir, self.rank, self.world_size, self.engine.algo,
                                      log_every or run_settings.get("log_every", 50),
                                      iterations_per_epoch)
        self._last_step_end = time.perf_counter()
        self._published = -1

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @property
    def rank(self):
        return self.engine.rank

    @property
    def world_size(self):
        return self.engine.world_size

    @property
    def weight(self):
        """This rank's push-sum weight w (the parameters hold z = x / w)."""
        return self.engine.weight

    @property
    def bytes_sent(self):
        return self.engine.bytes_sent

    @property
    def iteration(self):
        return self.engine.iteration

    def metrics(self):
        """The engine's: send/apply/wait seconds, rounds, bytes sent, rejected messages by
        cause, excluded peers (asgp)."""
        return self.engine.metrics()

    def _check_views(self):
        # model.to(), .half() or a load that replaces .data would leave the flat buffer behind:
        # gossip would mix stale values while training goes on elsewhere.
        if [p.data_ptr() for p in self.module.parameters()] != self._views:
            raise RuntimeError("sgp.torch: the module's parameters no longer live in the gossip "
                               "buffer (moved with .to() / .half() or replaced after wrapping); "
                               "move the module first, then wrap it")

    def gossip(self, loss=None, lr=None):
        """Call after every optimizer step: a gossip round when one is due. `loss` (a number or
        a one-element tensor) and `lr` go into the records. Returns whether it mixed."""
        self._check_views()
        start = time.perf_counter()
        if self.flat.is_cuda:  # the engine reads the buffer on its own stream
            torch.cuda.current_stream(self.flat.device).synchronize()
        mixed = self.engine.step(self.flat)
        end = time.perf_counter()
        if self.records:
            value = float(loss) if loss is not None else None
            self.records.add_iteration(end - self._last_step_end, end - start, self.batch_size,
                                       value)
            if lr is not None:
                self.lr = lr
            if self.records.due():
                self.records.training(self.lr, self.weight, self.metrics())
        self._last_step_end = time.perf_counter()
        return mixed

    @contextlib.contextmanager
    def paused(self):
        """Around a long pause of the training loop, such as an evaluation::

            with model.paused():
                accuracy, loss = evaluate(model)

        With asgp the ranks that push to this one keep their pushes meanwhile (otherwise they
        push into a rank that does not mix, and their own steps count for little until it takes
        them in); call ``self.engine.stay_heard()`` now and then in a pause longer than half of
        --timeout-ms. Other algorithms wait for each other anyway: nothing to do."""
        self.engine.pause()
        try:
            yield self
        finally:
            self.engine.resume()

    def evaluated(self, accuracy, loss):
        """Report this rank's test accuracy (fraction in [0, 1]) and loss at an evaluation
        point: recorded, and z goes to the consensus monitor."""
        if self.records:
            self.records.evaluation(accuracy, loss)
        self.publish()

    def publish(self):
        """z to the run's consensus monitor at the current iteration (best effort)."""
        if self._published != self.iteration:
            self.engine.publish(self.flat, self.iteration)
            self._published = self.iteration
        self._last_step_end = time.perf_counter()  # evaluation time is not iteration time

    def state_dict(self, *args, **kwargs):
        """The module's own state_dict (its parameters hold z): loadable into the plain
        module, without a prefix."""
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict=True):
        """Into the module, in place (the parameters stay views of the gossip buffer). A resume
        starts gossip afresh from these z with w = 1, as asgp's restarts do."""
        return self.module.load_state_dict(state_dict, strict)

    def gossip_state(self):
        """What a checkpoint keeps beside the state_dict: iteration, push-sum weight, rank."""
        return {"iteration": self.iteration, "weight": self.weight, "rank": self.rank}

    def finish(self, evaluate=None, model_name=None):
        """Ends the run: the engine's last exchanges (close), this rank's records and final
        model; on rank 0 with `evaluate(module) -> (accuracy, loss)`, the average of the ranks'
        final models is evaluated and reported for summary.json. Returns that (accuracy, loss)
        on rank 0, else None."""
        self._check_views()
        self.engine.close(self.flat)  # osgp/asgp: what was in flight is mixed into z
        if self._published != self.iteration:
            self.publish()  # the monitor's last record is of the last iteration
        if not self.records:
            return None
        metrics = self.metrics()
        self.records.training(self.lr, self.weight, metrics)
        self.records.summary(model_name or type(self.module).__name__, self.flat.numel(),
                             _describe_device(self.flat), self.weight, metrics)
        self.records.close()
        _save_atomically(self.module.state_dict(),
                         os.path.join(self.run_dir, f"peer-{self.rank}-model.pt"))
        if self.rank != 0 or evaluate is None:
            return None
        return self._evaluate_average(evaluate, metrics.get("excluded_peers", []))

    def _evaluate_average(self, evaluate, excluded):
        ranks = [r for r in range(self.world_size) if r not in set(excluded)]
        states = _wait_for_models(self.run_dir, ranks, FINAL_MODELS_TIMEOUT_S)
        average = average_state_dicts(states)
        model = copy.deepcopy(self.module)
        model.load_state_dict(average)
        model.eval()
        with torch.no_grad():
            accuracy, loss = evaluate(model)
        _save_atomically(average, os.path.join(self.run_dir, "model-average.pt"))
        write_json_atomically(os.path.join(self.run_dir, "average-model-evaluation.json"),
                              {"iteration": self.iteration, "peers": len(states),
                               "accuracy": float(accuracy), "loss": float(loss)})
        print(f"sgp.torch: average model of {len(states)} peers at iteration {self.iteration}: "
              f"test accuracy {100 * accuracy:.2f}%", flush=True)
        return float(accuracy), float(loss)


def _describe_device(tensor):
    where = "cpu" if tensor.device.type == "cpu" else str(tensor.device)
    return f"{where} (PyTorch {torch.__version__}, {torch.get_num_threads()} threads)"


def _save_atomically(state, path):
    temp = f"{path}.{os.getpid()}.tmp"
    torch.save(state, temp)
    os.replace(temp, path)


def _wait_for_models(run_dir, ranks, timeout_s):
    """The final state_dicts of `ranks` (peer-<rank>-model.pt), waiting up to `timeout_s` for
    those not yet written; a rank still missing then is left out, with a warning."""
    deadline = time.monotonic() + timeout_s
    states = {}
    while True:
        for r in ranks:
            path = os.path.join(run_dir, f"peer-{r}-model.pt")
            if r not in states and os.path.exists(path):
                states[r] = torch.load(path, map_location="cpu")
        if len(states) == len(ranks) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    missing = sorted(set(ranks) - set(states))
    if missing:
        print(f"sgp.torch: no final model of ranks {missing} after {timeout_s:.0f} s: the "
              "average model leaves them out", flush=True)
    return list(states.values())


def average_state_dicts(states):
    """The element-wise mean of floating-point entries; other entries (counters) from the
    first."""
    average = {}
    for key, first in states[0].items():
        if torch.is_floating_point(first):
            average[key] = sum(s[key].double() for s in states).div(len(states)).to(first.dtype)
        else:
            average[key] = first.clone()
    return average


__all__ = ["GossipDataParallel", "flatten_parameters", "average_state_dicts", "launch_settings"]
