"""asgp: 4 Python ranks over ZeroMQ; rank 3 is killed with SIGKILL while the others train. The
survivors exclude it (failure detector, --timeout-ms 1000), finish with exit 0, and end in
agreement on a convex combination of the starting vectors (the dead rank's mass is gone, so
not on the exact mean)."""

import argparse
import json
import os
import signal
import sys
import tempfile
import time

import peers

NUMEL = 1000
PEERS = 4
VICTIM = 3
SETTINGS = {"algo": "asgp", "timeout_ms": 1000}


def initial(np, rank):
    return (((5 * rank + 3 * np.arange(NUMEL)) % 17) - 8).astype(np.float32)


def worker(rank, topology, directory):
    import numpy as np
    import sgp
    z = initial(np, rank)
    gossip = sgp.Gossip(topology, rank, NUMEL, SETTINGS)
    peers.barrier(directory, rank, PEERS)
    give_up = time.monotonic() + 15
    steps = 0
    while time.monotonic() < give_up:
        gossip.step(z)
        steps += 1
        if rank == VICTIM and steps == 30:
            os.kill(os.getpid(), signal.SIGKILL)
        if VICTIM in gossip.metrics()["excluded_peers"] and steps >= 100:
            break
        time.sleep(0.002)
    gossip.close(z)
    print(json.dumps({"z": z.astype(float).tolist(), "steps": steps,
                      "excluded": gossip.metrics()["excluded_peers"]}))


def main():
    (np,) = peers.require("numpy")
    with tempfile.TemporaryDirectory() as tmp:
        held = peers.HeldPorts(PEERS)
        topology = peers.one_peer_exponential(tmp, PEERS, ports=held.ports)
        results = peers.run_ranks(__file__, PEERS, ["--topology", topology, "--barrier", tmp],
                                  timeout=60, held=held)
    assert results[VICTIM][0] == -signal.SIGKILL, peers.report(results)
    survivors = [res for rank, (rc, res, _) in enumerate(results) if rank != VICTIM]
    assert all(rc == 0 and res for rank, (rc, res, _) in enumerate(results) if rank != VICTIM), \
        peers.report(results)
    starts = np.stack([initial(np, r) for r in range(PEERS)])
    zs = np.array([res["z"] for res in survivors])
    for res in survivors:
        assert res["excluded"] == [VICTIM], peers.report(results)
    assert np.all(np.isfinite(zs))
    assert np.all(zs >= starts.min(axis=0) - 1e-4) and np.all(zs <= starts.max(axis=0) + 1e-4), \
        "a survivor's z is no convex combination of the starting vectors"
    spread = float(np.max(zs.max(axis=0) - zs.min(axis=0)))
    assert spread < 1e-2, f"the survivors disagree by {spread}"
    print(f"rank {VICTIM} killed and excluded; survivors exit 0, agree to {spread:.2g}, "
          f"steps {[res['steps'] for res in survivors]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int)
    parser.add_argument("--topology")
    parser.add_argument("--barrier")
    arguments = parser.parse_args()
    if arguments.rank is None:
        main()
    else:
        worker(arguments.rank, arguments.topology, arguments.barrier)
    sys.exit(0)
