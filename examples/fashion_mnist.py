"""Fashion-MNIST for the examples: read from the IDX files of the Debian package
dataset-fashion-mnist (or $SGP_DATA_DIR, or the run's --data-dir), normalised as sgp's C++ peers
do (pixel / 255, then (p - 0.2860) / 0.3530), and this rank's shard of the training set."""
import gzip
import os

import numpy as np
import torch

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def data_dir(settings):
    return settings.get("data_dir") or os.environ.get("SGP_DATA_DIR") or DEFAULT_DATA_DIR


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def load(directory, split):
    """(images [n, 1, 28, 28] float32, labels [n] int64) of split "train" or "t10k"."""
    images = read_idx(os.path.join(directory, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(directory, f"{split}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def shard(images, labels, rank, world_size, seed):
    """This rank's iid part of the training set (a seeded permutation cut in equal parts)."""
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    mine = order[rank::world_size]
    return images[mine], labels[mine]


def evaluate(model, images, labels, batch=1000):
    """(accuracy, mean cross-entropy loss) of `model` on a test set."""
    model.eval()
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(labels), batch):
            out = model(images[i:i + batch])
            total_loss += torch.nn.functional.cross_entropy(out, labels[i:i + batch],
                                                            reduction="sum").item()
            correct += (out.argmax(1) == labels[i:i + batch]).sum().item()
    model.train()
    return correct / len(labels), total_loss / len(labels)
