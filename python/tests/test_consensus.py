"""4 Python ranks over ZeroMQ on loopback (real processes) mix known vectors to their exact
mean: sgp (sync) with --gossip-every 2, and asgp with 20 % of the gossip messages dropped.

Values are small integers and the topology is the one-peer exponential graph of 4 peers, so
after 2 rounds of sync push-sum every float32 sum is exact. asgp mixes in double, but while
peers train their totals travel as float32 deltas, and z moves by a few units in its last place
for as long as they do (it never stops moving: a loop waiting for that ran into its 20 s cap
every time). close() mixes on, with float64 totals only, until every rank is done and z has
settled, and ends within float32's rounding of the mean, which for these values is the mean."""

import argparse
import json
import os
import sys
import tempfile
import time

import peers

NUMEL = 1000
PEERS = 4


def initial(np, rank):
    return (((5 * rank + 3 * np.arange(NUMEL)) % 17) - 8).astype(np.float32)


def exact_mean(np):
    return sum(initial(np, r).astype(np.float64) for r in range(PEERS)) / PEERS


def mix_for(gossip, z, args):
    """Steps (a round each) for `args.seconds` after every rank is up; close() then mixes on
    until every rank is done and z has settled."""
    peers.barrier(args.barrier, args.rank, PEERS)
    start, mixed = time.monotonic(), []
    while time.monotonic() - start < args.seconds:
        mixed.append(gossip.step(z))
        time.sleep(0.002)
    return mixed


def worker(args):
    import numpy as np
    import sgp
    settings = json.loads(args.settings)
    z = initial(np, args.rank)
    with sgp.Gossip(args.topology, args.rank, NUMEL, settings) as gossip:
        if args.seconds:  # asgp: mix for a while, as training would
            mixed = mix_for(gossip, z, args)
        else:
            mixed = [gossip.step(z) for _ in range(args.steps)]
        gossip.close(z)
        metrics = gossip.metrics()
        print(json.dumps({"z": z.astype(float).tolist(), "mixed": mixed, "weight": gossip.weight,
                          "rounds": metrics["rounds"], "bytes_sent": gossip.bytes_sent,
                          "iteration": gossip.iteration, "algo": gossip.algo}))


def check(np, results, name):
    assert all(rc == 0 and res for rc, res, _ in results), f"{name}:\n" + peers.report(results)
    mean = exact_mean(np)
    for rank, (_, res, _) in enumerate(results):
        error = float(np.max(np.abs(np.array(res["z"]) - mean)))
        assert error <= 1e-12, f"{name}: rank {rank} is {error} from the exact mean"
        assert res["bytes_sent"] > 0, f"{name}: rank {rank} sent nothing"
    print(f"{name}: 4 ranks at the exact mean; rounds {[r['rounds'] for _, r, _ in results]}")


def main():
    (np,) = peers.require("numpy")
    # glibc fills each new allocation with bytes 153 ^ 0xff = 0x66 (as floats, 2.7e23), not with
    # meson's random pick: a buffer the engine reads before anything is written to it shows every
    # time (asgp started from such an x lost every rank's values to rounding: all ranks at 0).
    os.environ["MALLOC_PERTURB_"] = "153"
    with tempfile.TemporaryDirectory() as tmp:
        topology = peers.one_peer_exponential(tmp, PEERS)
        sync = peers.run_ranks(__file__, PEERS, [
            "--topology", topology, "--steps", "8",
            "--settings", json.dumps({"algo": "sgp", "gossip_every": 2, "timeout_ms": 10000})])
        check(np, sync, "sgp, gossip_every 2")
        for _, res, _ in sync:
            assert res["mixed"] == [False, True] * 4, res["mixed"]
            assert res["rounds"] == 4 and res["weight"] == 1.0 and res["iteration"] == 8, res

        topology = peers.one_peer_exponential(tmp, PEERS)
        settings = {"algo": "asgp", "inject": "drop=0.2,seed=7", "timeout_ms": 5000}
        asgp = peers.run_ranks(__file__, PEERS, [
            "--topology", topology, "--seconds", "1", "--barrier", tmp,
            "--settings", json.dumps(settings)], timeout=60)
        check(np, asgp, "asgp, 20% dropped")
        assert all(res["algo"] == "asgp" for _, res, _ in asgp)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int)
    parser.add_argument("--topology")
    parser.add_argument("--settings", default="{}")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--barrier")
    arguments = parser.parse_args()
    if arguments.rank is None:
        main()
    else:
        worker(arguments)
    sys.exit(0)
