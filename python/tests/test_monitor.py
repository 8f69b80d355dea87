"""publish() hands z to the run's consensus monitor: `sgp monitor` receives two ranks' snapshots
of iteration 1 and records their exact relative consensus error (z of 1s and 3s: mean 2,
squared distance 1 per element against 4: 0.25) and their weights' sum (2)."""

import json
import os
import subprocess
import sys
import tempfile
import time

import peers

np, = peers.require("numpy")
import sgp  # noqa: E402  (after the skip check)

DATA = os.environ.get("SGP_DATA_DIR", "/usr/share/datasets/fashion-mnist")
NUMEL = 28 * 28 * 10 + 10  # --model layers:flatten: the classifier only (the monitor evaluates it)

if not os.path.isdir(DATA):
    print(f"SKIPPED: no Fashion-MNIST in {DATA} for the monitor's evaluation (scripts/setup installs "
          "dataset-fashion-mnist)", flush=True)
    sys.exit(peers.SKIP)

with tempfile.TemporaryDirectory() as tmp:
    topology = peers.one_peer_exponential(tmp, 2)
    endpoint = f"tcp://127.0.0.1:{peers.free_ports(1)[0]}"
    monitor = subprocess.Popen(
        [os.path.join(os.environ["SGP_BUILD_DIR"], "sgp"), "monitor", "--topology", topology,
         "--bind", endpoint, "--run-dir", tmp, "--until-iteration", "1",
         "--model", "layers:flatten"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        gossips = [sgp.Gossip(topology, r, NUMEL, {"algo": "local"}, monitor=endpoint)
                   for r in range(2)]
        for rank, g in enumerate(gossips):
            z = np.full(NUMEL, 1.0 + 2 * rank, dtype=np.float32)
            deadline = time.monotonic() + 20
            while not g.publish(z, 1):  # dropped until the monitor is up: never blocks
                assert monitor.poll() is None, monitor.communicate()[0]
                assert time.monotonic() < deadline, "the monitor never took a snapshot"
                time.sleep(0.05)
        output, _ = monitor.communicate(timeout=60)
    finally:
        monitor.kill()
    assert monitor.returncode == 0, output
    with open(os.path.join(tmp, "monitor.jsonl")) as f:
        record = json.loads(f.readline())
    assert record["iteration"] == 1 and record["peers"] == 2, record
    assert record["consensus_error"] == 0.25 and record["sum_of_weights"] == 2.0, record
print(f"the monitor recorded {record}")
