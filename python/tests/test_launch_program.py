"""`sgp launch --topology T -- /usr/bin/python3 tiny_program.py` (2 ranks) writes the run
directory of a C++ run (--self-weight 0.75, so that the ranks still differ at the end):
config.json, mixing.dot, per-rank logs and records with the C++ peer's
field names, the monitor's records and summary, and summary.json with the consensus error of the
ranks' final models and the accuracy the program reports for their average; then
scripts/plot-run draws it.

Usage: test_launch_program.py SGP_EXECUTABLE SOURCE_ROOT"""

import json
import os
import subprocess
import sys
import tempfile

import peers

PEERS = 2
TRAINING_FIELDS = {"iteration", "epoch", "wall_time", "interval", "loss", "lr", "compute_s",
                   "weight", "bytes_sent", "wait_s", "communication_s", "send_s", "apply_s",
                   "rejected_messages"}


def load(path):
    with open(path) as f:
        return json.load(f)


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def check_records(run):
    for rank in range(PEERS):
        records = jsonl(os.path.join(run, f"peer-{rank}.jsonl"))
        training = [r for r in records if "loss" in r]
        evaluations = [r["iteration"] for r in records if "test_accuracy" in r]
        assert training and TRAINING_FIELDS <= set(training[0]), training
        assert training[-1]["iteration"] == 6 and evaluations == [3, 6], records
        summary = load(os.path.join(run, f"peer-{rank}-summary.json"))
        assert summary["rank"] == rank and summary["iterations"] == 6, summary
        assert summary["bytes_sent_per_iteration"] > 0 and summary["algo"] == "sgp", summary
        assert os.path.exists(os.path.join(run, f"peer-{rank}.log"))
    for name in ("config.json", "mixing.dot", "run.json", "monitor-summary.json"):
        assert os.path.exists(os.path.join(run, name)), f"no {name} in {os.listdir(run)}"


def check_summary(torch, run):
    """summary.json: the monitor's consensus error of the final z and the accuracy the program
    reported, both recomputed here from the ranks' final models."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tiny_program
    import sgp.torch
    states = [torch.load(os.path.join(run, f"peer-{r}-model.pt")) for r in range(PEERS)]
    z = [torch.cat([v.reshape(-1).double() for v in s.values()]) for s in states]
    mean = sum(z) / PEERS
    error = float(sum((v - mean).square().sum() for v in z) / PEERS / mean.square().sum())
    model = torch.nn.Linear(8, 4)
    model.load_state_dict(sgp.torch.average_state_dicts(states))
    accuracy, _ = tiny_program.evaluate(model)
    summary = load(os.path.join(run, "summary.json"))
    assert summary["iterations"] == 6 and summary["monitor_evaluations"] == 2, summary
    assert summary["final_average_model_accuracy"] == accuracy, (summary, accuracy)
    assert error > 0 and abs(summary["final_consensus_error"] - error) <= 1e-6 * error, (
        summary, error)
    assert [r["iteration"] for r in jsonl(os.path.join(run, "monitor.jsonl"))] == [3, 6]


def main():
    torch, _ = peers.require("torch", "sgp.torch")
    sgp_exe, source = sys.argv[1], sys.argv[2]
    program = os.path.join(source, "python", "tests", "tiny_program.py")
    with tempfile.TemporaryDirectory() as tmp:
        topology = peers.one_peer_exponential(tmp, PEERS, launch=True)
        run = os.path.join(tmp, "run")
        launch = subprocess.run(
            [sgp_exe, "launch", "--topology", topology, "--insecure", "--run-dir", run,
             "--log-every", "2", "--self-weight", "0.75", "--", sys.executable, program],
            capture_output=True, text=True, timeout=120)
        assert launch.returncode == 0, launch.stdout + launch.stderr
        check_records(run)
        check_summary(torch, run)
        plot = subprocess.run([sys.executable, os.path.join(source, "scripts", "plot-run"), run],
                              capture_output=True, text=True, timeout=60)
        assert plot.returncode == 0 and os.path.exists(os.path.join(run, "training.png")), plot
    print(f"sgp launch -- python: {PEERS} ranks, the run directory of a C++ run, plotted")


if __name__ == "__main__":
    main()
