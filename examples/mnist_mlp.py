#!/usr/bin/python3
"""A PyTorch MLP (784-512-512-10, sgp's W1) trained on Fashion-MNIST by SGP with sgp's engine.

    sgp launch --topology topologies/ring4.dot --epochs 1 -- /usr/bin/python3 examples/mnist_mlp.py

The run's settings come from `sgp launch`'s flags (config.json), with the meaning they have for
sgp's own peers: --epochs, --max-iterations, --batch-size, --lr (with --lr-scaling, --lr-decay,
--warmup-epochs), --momentum, --nesterov, --weight-decay, --seed, --eval-every, --log-every,
--data-dir, --blas-threads; --algo, --gossip-every, --self-weight ... go to the gossip engine.
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402
import sgp.torch  # noqa: E402


def learning_rate(s, iteration, total, per_epoch, peers):
    """The rate of `sgp peer`'s schedule (src/model/lr_schedule.cpp): --lr for a global batch of
    256 scaled to batch * peers (--lr-scaling linear), linear warm-up, then constant, step or
    cosine decay."""
    lr = s.get("lr", 0.1)
    if s.get("lr_scaling", "linear") == "linear":
        lr *= s.get("batch_size", 32) * peers / 256
    warmup = round(s.get("warmup_epochs", 0) * per_epoch)
    if iteration < warmup:
        return lr * (iteration + 1) / warmup
    decay = s.get("lr_decay", "cosine")
    if decay == "cosine":
        t = min(1.0, max(0.0, (iteration - warmup) / max(1, total - warmup)))
        return lr * 0.5 * (1 + math.cos(math.pi * t))
    if decay == "step":
        passed = sum(iteration >= round(m * per_epoch) for m in s.get("lr_milestones", []))
        return lr * s.get("lr_gamma", 0.1) ** passed
    return lr


def w1():
    """sgp's W1: MLP 784-512-512-10 (sgp's --model mlp:512,512)."""
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512),
                         nn.ReLU(), nn.Linear(512, 10))


def main(make_model=w1):
    s = sgp.torch.launch_settings()
    torch.set_num_threads(s.get("blas_threads", 1))
    torch.manual_seed(s.get("seed", 1))  # the same initial model on every rank
    where = fashion_mnist.data_dir(s)
    train_x, train_y = fashion_mnist.load(where, "train")
    test_x, test_y = fashion_mnist.load(where, "t10k")
    batch = s.get("batch_size", 32)
    model = make_model()
    per_epoch = math.ceil(len(train_y) / int(os.environ.get("WORLD_SIZE", 1)) / batch)
    model = sgp.torch.GossipDataParallel(model, iterations_per_epoch=per_epoch, batch_size=batch)
    x, y = fashion_mnist.shard(train_x, train_y, model.rank, model.world_size, s.get("seed", 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=s.get("lr", 0.1),
                                momentum=s.get("momentum", 0.9), nesterov=s.get("nesterov", True),
                                weight_decay=s.get("weight_decay", 1e-4))
    total = round(s.get("epochs", 1) * per_epoch)
    if s.get("max_iterations", 0) > 0:
        total = min(total, s["max_iterations"])
    eval_every = max(1, round(s.get("eval_every", 0.25) * per_epoch))
    generator = torch.Generator().manual_seed(s.get("seed", 1) + model.rank)
    order = torch.randperm(len(y), generator=generator)
    for it in range(total):
        start = (it % per_epoch) * batch
        if start == 0 and it > 0:
            order = torch.randperm(len(y), generator=generator)
        idx = order[start:start + batch]
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(s, it, total, per_epoch, model.world_size)
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        model.gossip(loss, lr=optimizer.param_groups[0]["lr"])
        if (it + 1) % eval_every == 0 or it + 1 == total:
            with model.paused():  # asgp: the ranks that push to this one hold on meanwhile
                model.evaluated(*fashion_mnist.evaluate(model, test_x, test_y))
    model.finish(lambda average: fashion_mnist.evaluate(average, test_x, test_y))


if __name__ == "__main__":
    main()
