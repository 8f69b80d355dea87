"""sgp.torch.GossipDataParallel, 4 ranks over ZeroMQ on loopback (threads of this process, each
with its own engine and sockets: the engine releases the GIL while it communicates, and one
process imports torch once, which takes seconds here): with lr 0 the
optimizer changes nothing, so gossip alone moves the parameters, and push-sum keeps their average:
the mean over the ranks of every parameter is the mean of the initial ones (exactly: the initial
values are small integers and the one-peer exponential graph of 4 peers averages them exactly
after 2 rounds, so every rank then holds that mean too). Also: the module's own state_dict is z,
and misuse (float64 parameters, a module moved after wrapping) raises a clear error."""

import sys
import tempfile
import threading

import peers

PEERS = 4
STEPS = 6


def small_model(torch, rank):
    """Linear(5, 3) + Linear(3, 2) whose parameters are small integers that differ by rank."""
    model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    with torch.no_grad():
        k = 0
        for p in model.parameters():
            n = p.numel()
            p.copy_((((7 * rank + 3 * torch.arange(k, k + n)) % 11) - 5).float().view_as(p))
            k += n
    return model


def initial_mean(torch):
    flats = [torch.cat([p.detach().reshape(-1) for p in small_model(torch, r).parameters()])
             for r in range(PEERS)]
    return (sum(f.double() for f in flats) / PEERS).tolist()


def rank_main(torch, sgp_torch, rank, topology, results):
    model = sgp_torch.GossipDataParallel(small_model(torch, rank), topology=topology, rank=rank,
                                         settings={"algo": "sgp", "timeout_ms": 10000})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0, momentum=0.9, nesterov=True)
    inputs = torch.ones(4, 5)
    for _ in range(STEPS):
        loss = model(inputs).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.gossip(loss)
    model.finish()
    state = torch.cat([v.reshape(-1) for v in model.state_dict().values()])
    assert torch.equal(state, model.flat), "the module's state_dict is not the gossiped z"
    results[rank] = {"flat": model.flat.double().tolist(), "bytes_sent": model.bytes_sent,
                     "iteration": model.iteration}


def run_ranks(torch, sgp_torch, topology):
    results, errors = {}, []

    def body(rank):
        try:
            rank_main(torch, sgp_torch, rank, topology, results)
        except BaseException as e:  # reported below, with its rank
            errors.append(f"rank {rank}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=body, args=(r,)) for r in range(PEERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(results) == PEERS, f"ranks failed: {errors}"
    return [results[r] for r in range(PEERS)]


def check_misuse(torch, sgp_torch, tmp):
    try:
        sgp_torch.GossipDataParallel(torch.nn.Linear(2, 2).double(), topology="unused", rank=0)
        raise AssertionError("float64 parameters were accepted")
    except TypeError as e:
        assert "float32" in str(e), e
    # A module moved after wrapping no longer trains the gossip buffer: refused at the next step.
    path = f"{tmp}/one.dot"
    with open(path, "w") as f:
        f.write(f'digraph t {{ 0 [endpoint="tcp://127.0.0.1:{peers.free_ports(1)[0]}"]; }}\n')
    model = sgp_torch.GossipDataParallel(torch.nn.Linear(2, 2), topology=path, rank=0)
    model.module.double()
    try:
        model.gossip()
        raise AssertionError("a module moved after wrapping was gossiped")
    except RuntimeError as e:
        assert "no longer live in the gossip buffer" in str(e), e
    print("misuse: float64 parameters and a module moved after wrapping are refused")


def main():
    torch, _ = peers.require("torch", "sgp.torch")
    import sgp.torch
    with tempfile.TemporaryDirectory() as tmp:
        check_misuse(torch, sgp.torch, tmp)
        topology = peers.one_peer_exponential(tmp, PEERS)
        results = run_ranks(torch, sgp.torch, topology)
    mean = initial_mean(torch)
    flats = [res["flat"] for res in results]
    for k, expected in enumerate(mean):
        average = sum(f[k] for f in flats) / PEERS
        assert abs(average - expected) <= 1e-12, f"parameter {k}: mean {average}, was {expected}"
        for rank, f in enumerate(flats):
            assert abs(f[k] - expected) <= 1e-12, f"rank {rank} parameter {k}: {f[k]} != {expected}"
    assert all(res["bytes_sent"] > 0 and res["iteration"] == STEPS for res in results), results
    print(f"lr 0: the average of {len(mean)} parameters over {PEERS} ranks is unchanged, and "
          "every rank holds it")


if __name__ == "__main__":
    sys.exit(main())
