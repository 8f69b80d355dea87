"""4 Python ranks over ZeroMQ on loopback (real processes) mix known vectors to their exact
mean: sgp (sync) with --gossip-every 2, and asgp with 20 % of the gossip messages dropped.

Values are small integers and the topology is the one-peer exponential graph of 4 peers, so
after 2 rounds of sync push-sum every float32 sum is exact. asgp mixes in double, but while
peers train their totals travel as float32 deltas, and z moves by a few units in its last place
for as long as they do (it never stops moving: a loop waiting for that ran into its 20 s cap
every time). close() mixes on, with float64 totals only, until every rank is done and z has
settled, and ends within float32's rounding of the mean, which for these values is the mean.

Again with one asgp rank pausing for 0.4 s (Gossip.pause / resume, as around an evaluation) while
the others mix on: they agree to settling's bound, 1e-9 of the vector's norm, not to 1e-12.
Settling stops once z + r moves by less than 1e-9 of its norm a round; after the pause the
ranks' rounds are out of step, the one-peer exponential graph no longer averages exactly once a
period, and the last disagreement decays only geometrically: 1e-12 to 6e-10 on elements whose
mean is 0 (where float32 cannot round it away), in 4 of 4 runs above 1e-12 (with a plain 0.4 s
sleep instead of the pause, 1 of 3)."""

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
        if args.pause and args.rank == 1 and len(mixed) == 50:  # an evaluation's pause
            gossip.pause()
            time.sleep(0.2)
            gossip.stay_heard()
            time.sleep(0.2)
            gossip.resume()
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


def check(np, results, name, tolerance=1e-12):
    assert all(rc == 0 and res for rc, res, _ in results), f"{name}:\n" + peers.report(results)
    mean = exact_mean(np)
    for rank, (_, res, _) in enumerate(results):
        error = float(np.max(np.abs(np.array(res["z"]) - mean)))
        assert error <= tolerance, f"{name}: rank {rank} is {error} from the exact mean"
        assert res["bytes_sent"] > 0, f"{name}: rank {rank} sent nothing"
    print(f"{name}: 4 ranks at the exact mean; rounds {[r['rounds'] for _, r, _ in results]}")


def main():
    (np,) = peers.require("numpy")
    # glibc fills each new allocation with bytes 153 ^ 0xff = 0x66 (as floats, 2.7e23), not with
    # meson's random pick: a buffer the engine reads before anything is written to it shows every
    # time (asgp started from such an x lost every rank's values to rounding: all ranks at 0).
    os.environ["MALLOC_PERTURB_"] = "153"
    with tempfile.TemporaryDirectory() as tmp:
        held = peers.HeldPorts(PEERS)
        topology = peers.one_peer_exponential(tmp, PEERS, ports=held.ports)
        sync = peers.run_ranks(__file__, PEERS, [
            "--topology", topology, "--steps", "8",
            "--settings", json.dumps({"algo": "sgp", "gossip_every": 2, "timeout_ms": 10000})],
            held=held)
        check(np, sync, "sgp, gossip_every 2")
        for _, res, _ in sync:
            assert res["mixed"] == [False, True] * 4, res["mixed"]
            assert res["rounds"] == 4 and res["weight"] == 1.0 and res["iteration"] == 8, res

        held = peers.HeldPorts(PEERS)
        topology = peers.one_peer_exponential(tmp, PEERS, ports=held.ports)
        settings = {"algo": "asgp", "inject": "drop=0.2,seed=7", "timeout_ms": 5000}
        asgp = peers.run_ranks(__file__, PEERS, [
            "--topology", topology, "--seconds", "1", "--barrier", tmp,
            "--settings", json.dumps(settings)], timeout=60, held=held)
        check(np, asgp, "asgp, 20% dropped")
        assert all(res["algo"] == "asgp" for _, res, _ in asgp)

        held = peers.HeldPorts(PEERS)
        topology = peers.one_peer_exponential(tmp, PEERS, ports=held.ports)
        os.makedirs(tmp + "/paused")
        paused = peers.run_ranks(__file__, PEERS, [
            "--topology", topology, "--seconds", "1", "--barrier", tmp + "/paused", "--pause",
            "--settings", json.dumps(settings)], timeout=60, held=held)
        # Settling's own bound: z + r moving by less than 1e-9 of its norm (1.5e-7 here).
        check(np, paused, "asgp, 20% dropped, rank 1 paused for 0.4 s",
              tolerance=1e-9 * float(np.linalg.norm(exact_mean(np))))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int)
    parser.add_argument("--topology")
    parser.add_argument("--settings", default="{}")
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0.0)
    parser.add_argument("--barrier")
    parser.add_argument("--pause", action="store_true")
    arguments = parser.parse_args()
    if arguments.rank is None:
        main()
    else:
        worker(arguments)
    sys.exit(0)
