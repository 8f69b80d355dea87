#!/usr/bin/python3
"""PyTorch DistributedDataParallel over gloo on this host, for scripts/bench-torch-bridge: the
model, data, shards and learning-rate schedule of examples/mnist_mlp.py (W1 by default: MLP
784-512-512-10, batch 32 per rank, Nesterov, sgp's default schedule), one CPU thread per rank.

    bench_torch_ddp.py --peers N [--epochs E]

starts N ranks and prints one JSON line: mean_iteration_ms (each rank's mean after 20 warm-up
iterations, evaluations excluded; the median over the ranks, as summary.json), the allreduce's
bytes per iteration and rank (2 (N - 1) / N of the gradients' bytes: gloo's ring, computed, gloo
counts nothing), and the test accuracy of the final model (every replica holds it).
"""
import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import time

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


def rank_main(args):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, EXAMPLES)
    import fashion_mnist
    import mnist_mlp
    torch.set_num_threads(1)
    rank, peers = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=peers)
    settings = {"epochs": args.epochs, "batch_size": 32, "seed": 0}
    torch.manual_seed(0)
    where = fashion_mnist.data_dir(settings)
    train_x, train_y = fashion_mnist.load(where, "train")
    test_x, test_y = fashion_mnist.load(where, "t10k")
    model = torch.nn.parallel.DistributedDataParallel(mnist_mlp.w1())
    x, y = fashion_mnist.shard(train_x, train_y, rank, peers, 0)
    per_epoch = math.ceil(len(train_y) / peers / 32)
    total = round(args.epochs * per_epoch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                                weight_decay=1e-4)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(rank))
    times = []
    for it in range(total):
        start = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = mnist_mlp.learning_rate(settings, it, total, per_epoch, peers)
        idx = order[(it % per_epoch) * 32:][:32]
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    mean_ms = torch.tensor([1e3 * statistics.fmean(times[20:])])
    gathered = [torch.zeros(1) for _ in range(peers)]
    dist.all_gather(gathered, mean_ms)
    if rank == 0:
        accuracy, _ = fashion_mnist.evaluate(model.module, test_x, test_y)
        numel = sum(p.numel() for p in model.parameters())
        print(json.dumps({
            "peers": peers, "iterations": total,
            "mean_iteration_ms": statistics.median(float(t) for t in gathered),
            "bytes_sent_per_iteration": 2 * (peers - 1) / peers * 4 * numel,
            "average_model_accuracy": accuracy, "torch_version": torch.__version__}))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--peers", type=int, required=True)
    parser.add_argument("--epochs", type=float, default=1.0)
    args = parser.parse_args()
    if "RANK" in os.environ:
        return rank_main(args)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "WORLD_SIZE": str(args.peers)}
    ranks = [subprocess.Popen([sys.executable, __file__, *sys.argv[1:]],
                              env={**base, "RANK": str(r)}) for r in range(args.peers)]
    codes = [p.wait() for p in ranks]
    if any(codes):
        print(f"bench_torch_ddp: exit codes {codes}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
