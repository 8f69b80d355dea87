#!/usr/bin/python3
"""A small PyTorch CNN with batch norm (a model sgp's own kernels do not have) trained on
Fashion-MNIST by SGP with sgp's engine; the loop is examples/mnist_mlp.py's.

    sgp launch --topology topologies/ring4.dot --epochs 1 -- /usr/bin/python3 examples/mnist_cnn.py

Batch norm's running statistics are buffers: each rank keeps its own (not gossiped); the average
model at the end averages them.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_mlp  # noqa: E402

nn = torch.nn


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10))


if __name__ == "__main__":
    mnist_mlp.main(cnn)
