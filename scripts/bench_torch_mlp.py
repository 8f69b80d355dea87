#!/usr/bin/python3
"""PyTorch reference for scripts/bench-train-vs-torch: a training step on one CPU thread.

Same model (--model mlp:512,512 = W1, MLP 784-512-512-10; lenet; lenet-wide: see
include/sgp/model/model_spec.hpp), same batch (32), same optimizer (SGD, Nesterov momentum 0.9,
weight decay 1e-4), same normalised Fashion-MNIST pixels, softmax cross-entropy.
Prints one JSON line: {"samples_per_second": ..., "median_iteration_ms": ...}.
"""
import argparse
import gzip
import json
import statistics
import time

import numpy as np
import torch


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def lenet(c1, c2, hidden):
    """LeNet-5 with ReLU and max pooling (c1, c2, hidden = 6, 16, 120: the lenet preset)."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, c1, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(c2 * 25, hidden), nn.ReLU(), nn.Linear(hidden, 84), nn.ReLU(),
        nn.Linear(84, 10))


MODELS = {
    "mlp:512,512": lambda: torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10)),
    "lenet": lambda: lenet(6, 16, 120),
    "lenet-wide": lambda: lenet(16, 32, 128),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--iterations", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--model", default="mlp:512,512", choices=sorted(MODELS))
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    images = read_idx(f"{args.data_dir}/train-images-idx3-ubyte.gz").reshape(-1, 784)
    labels = read_idx(f"{args.data_dir}/train-labels-idx1-ubyte.gz").astype(np.int64)
    x = torch.from_numpy((images.astype(np.float32) / 255.0 - 0.2860) / 0.3530)
    y = torch.from_numpy(labels)
    model = MODELS[args.model]()
    if args.model != "mlp:512,512":
        x = x.reshape(-1, 1, 28, 28)  # NCHW for Conv2d
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0125, momentum=0.9, nesterov=True,
                                weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    order = torch.randperm(x.shape[0])
    times = []
    for it in range(args.iterations):
        start = time.perf_counter()
        idx = order[(it * args.batch_size) % (x.shape[0] - args.batch_size):][:args.batch_size]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    steady = times[20:]
    print(json.dumps({
        "samples_per_second": args.batch_size * len(steady) / sum(steady),
        "median_iteration_ms": 1e3 * statistics.median(steady),
        "torch_version": torch.__version__,
        "final_loss": float(loss),
    }))


if __name__ == "__main__":
    main()
