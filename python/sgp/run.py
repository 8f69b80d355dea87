"""The run directory records of one rank, as a C++ peer writes them (src/peer/trainer.cpp,
src/run/summaries.cpp), for programs started by ``sgp launch ... -- COMMAND``:

- ``peer-<rank>.jsonl``: one JSON object per log point (training fields every ``log_every``
  iterations and at the end) and per evaluation (``test_accuracy``, ``test_loss``), with the
  same field names as a C++ peer's, so that ``scripts/plot-run`` and ``sgp summarize`` read
  them;
- ``peer-<rank>-summary.json``: the fields of ``run::PeerSummary``.

Plain Python: no torch, no numpy.
"""
import json
import os
import statistics
import time

# The first iterations are left out of the timing statistics (warm-up), as the C++ peer does.
WARMUP_ITERATIONS = 20


def launch_settings():
    """The run's settings (config.json's keys: lr, batch_size, epochs, ...) when started by
    ``sgp launch``, else an empty dict."""
    path = os.environ.get("SGP_CONFIG")
    if not path:
        return {}
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"SGP_CONFIG={path}: cannot read the run's config.json: {e}") from None


def write_json_atomically(path, value):
    """Writes a whole JSON file under a temporary name, then renames it into place."""
    temp = f"{path}.{os.getpid()}.tmp"
    with open(temp, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)


def _percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class RunRecords:
    """Accumulates one rank's iterations and writes its records into ``run_dir``."""

    def __init__(self, run_dir, rank, peers, algo, log_every=50, iterations_per_epoch=None):
        if log_every < 1:
            raise ValueError(f"log_every: {log_every}; expected at least 1")
        self.run_dir, self.rank, self.peers, self.algo = run_dir, rank, peers, algo
        self.log_every = log_every
        self.iterations_per_epoch = iterations_per_epoch
        self.iteration = 0
        self.start = time.perf_counter()
        self.iteration_seconds = []
        self.samples = 0
        self.last_loss = 0.0
        self.last_evaluation = None  # (accuracy, loss)
        self._window = {"loss": 0.0, "losses": 0, "count": 0, "compute_s": 0.0, "comm_s": 0.0}
        self._metrics_before = {}
        self._log = open(os.path.join(run_dir, f"peer-{rank}.jsonl"), "w")

    def _base(self, iteration):
        record = {"iteration": iteration, "wall_time": time.perf_counter() - self.start}
        if self.iterations_per_epoch:
            record["epoch"] = iteration / self.iterations_per_epoch
        return record

    def _write(self, record):
        self._log.write(json.dumps(record) + "\n")
        self._log.flush()

    def add_iteration(self, seconds, comm_seconds, samples, loss):
        """One optimizer step (and its gossip round) took `seconds`, `comm_seconds` of them in
        the gossip step; `loss` may be None (not recorded)."""
        self.iteration += 1
        self.iteration_seconds.append(seconds)
        self.samples += samples
        w = self._window
        w["count"] += 1
        w["compute_s"] += seconds - comm_seconds
        w["comm_s"] += comm_seconds
        if loss is not None:
            w["loss"] += loss
            w["losses"] += 1

    def due(self):
        """Whether this iteration is a log point."""
        return self.iteration % self.log_every == 0

    def training(self, lr, weight, metrics):
        """Writes the training record of the iterations since the last one. `metrics`: the
        gossip engine's (Gossip.metrics()), whose counters are turned into differences."""
        w = self._window
        if w["count"] == 0:
            return
        if w["losses"]:
            self.last_loss = w["loss"] / w["losses"]
        before = self._metrics_before
        delta = {k: metrics.get(k, 0) - before.get(k, 0)
                 for k in ("wait_seconds", "send_seconds", "apply_seconds", "bytes_sent",
                           "bytes_received")}
        record = self._base(self.iteration)
        record.update({
            "interval": w["count"], "loss": self.last_loss, "compute_s": w["compute_s"],
            "weight": weight, "bytes_sent": delta["bytes_sent"],
            "wait_s": delta["wait_seconds"], "communication_s": w["comm_s"] - delta["wait_seconds"],
            "send_s": delta["send_seconds"], "apply_s": delta["apply_seconds"],
            "rejected_messages": sum(metrics.get("rejected", {}).values()),
        })
        if "bytes_received" in metrics:
            record["bytes_received"] = delta["bytes_received"]
        if lr is not None:
            record["lr"] = lr
        self._write(record)
        self._metrics_before = dict(metrics)
        self._window = {"loss": 0.0, "losses": 0, "count": 0, "compute_s": 0.0, "comm_s": 0.0}

    def evaluation(self, accuracy, loss):
        """An evaluation of this rank's z at the current iteration."""
        self.last_evaluation = (float(accuracy), float(loss))
        record = self._base(self.iteration)
        record.update({"test_accuracy": float(accuracy), "test_loss": float(loss)})
        self._write(record)

    def summary(self, model, parameters, device, weight, metrics, extra=None):
        """peer-<rank>-summary.json, with run::PeerSummary's field names."""
        steady = self.iteration_seconds[WARMUP_ITERATIONS:] or self.iteration_seconds or [0.0]
        train_seconds = sum(self.iteration_seconds)
        accuracy, test_loss = self.last_evaluation or (0.0, 0.0)
        summary = {
            "rank": self.rank, "peers": self.peers, "algo": self.algo, "device": device,
            "model": model, "parameters": parameters, "iterations": self.iteration,
            "epochs": self.iteration / self.iterations_per_epoch
            if self.iterations_per_epoch else 0.0,
            "final_train_loss": self.last_loss, "final_test_accuracy": accuracy,
            "final_test_loss": test_loss,
            "median_iteration_ms": 1e3 * statistics.median(steady),
            "p90_iteration_ms": 1e3 * _percentile(steady, 0.9),
            "mean_iteration_ms": 1e3 * statistics.fmean(steady),
            "samples_per_second": self.samples / train_seconds if train_seconds > 0 else 0.0,
            "wall_time_s": time.perf_counter() - self.start,
            "weight": weight,
            "bytes_sent_per_iteration": metrics.get("bytes_sent", 0) / max(1, self.iteration),
            "rejected_messages": sum(metrics.get("rejected", {}).values()),
        }
        if metrics.get("excluded_peers"):
            summary["excluded_peers"] = list(metrics["excluded_peers"])
        summary.update(extra or {})
        write_json_atomically(os.path.join(self.run_dir, f"peer-{self.rank}-summary.json"),
                              summary)
        return summary

    def close(self):
        self._log.close()
