#!/usr/bin/python3
"""Reads an sgp model file (peer-<rank>-model.bin, model-average.bin; the format and the
parameter layout are in docs/run-directory.md), with Python's standard library only:

    import sgp_model
    spec, params = sgp_model.read("runs/x/model-average.bin")   # "mlp:512,512", array('f')

and, for models of Linear and ReLU layers (mlp:..., layers:linearN,relu,...), with numpy:

    layers = sgp_model.linear_layers(spec, params)   # [(W [out x in], b [out], relu after)]
    logits = sgp_model.forward(layers, sgp_model.normalise(pixels))   # pixels: uint8 [n, 784]

or as a PyTorch state_dict of sgp_model.torch_module(spec) (an nn.Sequential):

    model = sgp_model.torch_module(spec)
    model.load_state_dict(sgp_model.state_dict(spec, params))
"""
import argparse
import array
import gzip
import math
import os
import struct
import sys

MAGIC = b"SGPMODEL"
VERSION = 1
# What sgp feeds its networks: Fashion-MNIST pixels as (x / 255 - MEAN) / STD, 28 x 28 images
# flattened row by row (include/sgp/data/dataset.hpp), 10 classes.
MEAN, STD = 0.2860, 0.3530
INPUTS, CLASSES = 28 * 28, 10


def fnv1a(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def read(path, check=True):
    """(spec, parameters) of the model file at `path`; ValueError for one that is not."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 32 or not data.startswith(MAGIC):
        raise ValueError(f"{path}: not an sgp model file")
    body, (checksum,) = data[:-8], struct.unpack("<Q", data[-8:])
    # The checksum in pure Python takes about a second for W1; check=False skips it.
    if check and checksum != fnv1a(body):
        raise ValueError(f"{path}: damaged (checksum)")
    version, length = struct.unpack_from("<II", body, 8)
    if version != VERSION:
        raise ValueError(f"{path}: version {version}, this reader reads {VERSION}")
    spec = body[16:16 + length].decode()
    (n,) = struct.unpack_from("<Q", body, 16 + length)
    params = array.array("f")
    params.frombytes(body[24 + length:])
    if sys.byteorder != "little":
        params.byteswap()
    if len(params) != n:
        raise ValueError(f"{path}: {len(params)} parameters, the header says {n}")
    return spec, params


def linear_widths(spec):
    """The outputs of each Linear layer of an MLP spec, the classifier's included, and whether a
    ReLU follows it: [(outputs, relu)]. ValueError for a spec with other layers (convolutions,
    pooling), whose layouts this module does not convert."""
    if spec.startswith("mlp:"):
        hidden = [int(w) for w in spec[4:].split(",")]
        return [(w, True) for w in hidden] + [(CLASSES, False)]
    if spec.startswith("layers:"):
        widths = []
        for layer in spec[7:].split(","):
            if layer.startswith("linear") and layer[6:].isdigit():
                widths.append([int(layer[6:]), False])
            elif layer == "relu" and widths and not widths[-1][1]:
                widths[-1][1] = True
            elif layer != "flatten":
                raise ValueError(f"model '{spec}': layer '{layer}' is not converted here "
                                 "(Linear and ReLU layers only)")
        return [tuple(w) for w in widths] + [(CLASSES, False)]
    raise ValueError(f"model '{spec}': Linear and ReLU layers only (mlp:... or layers:linearN,"
                     "relu,...)")


def linear_layers(spec, params):
    """[(W, b, relu)] of an MLP as numpy float32 arrays: each layer's slice of the flat
    parameters is W [outputs x inputs] row-major, then b [outputs]."""
    import numpy as np
    flat = np.asarray(params, dtype=np.float32)
    layers, offset, inputs = [], 0, INPUTS
    for outputs, relu in linear_widths(spec):
        w = flat[offset:offset + outputs * inputs].reshape(outputs, inputs)
        offset += outputs * inputs
        b = flat[offset:offset + outputs]
        offset += outputs
        layers.append((w, b, relu))
        inputs = outputs
    if offset != len(flat):
        raise ValueError(f"model '{spec}' has {offset} parameters, the file {len(flat)}")
    return layers


def normalise(pixels):
    """uint8 pixels [n, 784] as sgp feeds them to the network."""
    import numpy as np
    return (np.asarray(pixels, dtype=np.float32) / 255.0 - MEAN) / STD


def forward(layers, x):
    """The logits [n, classes] of inputs x [n, 784] (normalised)."""
    import numpy as np
    for w, b, relu in layers:
        x = x @ w.T + b
        if relu:
            x = np.maximum(x, 0)
    return x


def read_idx(path):
    """An IDX file (Fashion-MNIST's format, gzip or not) as a numpy uint8 array."""
    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(f">{dims}I", data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def test_set(data_dir):
    """(pixels [10000, 784], labels) of Fashion-MNIST's test set in data_dir."""
    def find(name):
        for candidate in (name + ".gz", name):
            if os.path.exists(os.path.join(data_dir, candidate)):
                return os.path.join(data_dir, candidate)
        raise FileNotFoundError(f"{data_dir}: no {name}(.gz)")
    images = read_idx(find("t10k-images-idx3-ubyte"))
    return images.reshape(len(images), -1), read_idx(find("t10k-labels-idx1-ubyte"))


def torch_module(spec):
    """An nn.Sequential of Linear and ReLU layers that state_dict(spec, ...) fits."""
    import torch.nn as nn
    modules, inputs = [], INPUTS
    for outputs, relu in linear_widths(spec):
        modules.append(nn.Linear(inputs, outputs))
        if relu:
            modules.append(nn.ReLU())
        inputs = outputs
    return nn.Sequential(*modules)


def state_dict(spec, params):
    """The model as a state_dict of torch_module(spec): "<index>.weight" (torch's Linear weight
    is [outputs x inputs] too) and "<index>.bias" per Linear layer."""
    import collections
    import torch
    out, index = collections.OrderedDict(), 0
    for w, b, relu in linear_layers(spec, params):
        out[f"{index}.weight"] = torch.from_numpy(w.copy())
        out[f"{index}.bias"] = torch.from_numpy(b.copy())
        index += 2 if relu else 1
    return out


def main():
    parser = argparse.ArgumentParser(
        description="Reads an sgp model file: prints its spec, parameter count and norm; "
                    "optionally its test accuracy computed with numpy alone, or a PyTorch "
                    "state_dict export (Linear and ReLU models).",
        epilog="The file format and the parameter layout: docs/run-directory.md.")
    parser.add_argument("model", help="a model file (peer-<rank>-model.bin, model-average.bin)")
    parser.add_argument("--accuracy", action="store_true",
                        help="also its Fashion-MNIST test accuracy, computed with numpy")
    parser.add_argument("--data-dir", default=os.environ.get(
        "SGP_DATA_DIR", "/usr/share/datasets/fashion-mnist"),
        help="Fashion-MNIST's directory (default $SGP_DATA_DIR, else Debian's)")
    parser.add_argument("--state-dict", metavar="OUT.pt",
                        help="write the model as a PyTorch state_dict of torch_module(spec)")
    args = parser.parse_args()
    try:
        spec, params = read(args.model)
        norm = math.sqrt(math.fsum(p * p for p in params))
        print(f"{args.model}: model {spec}, {len(params)} parameters, norm {norm:.6g}")
        if args.accuracy:
            pixels, labels = test_set(args.data_dir)
            predicted = forward(linear_layers(spec, params), normalise(pixels)).argmax(axis=1)
            print(f"test accuracy {100.0 * (predicted == labels).mean():.2f}%")
        if args.state_dict:
            import torch
            torch.save(state_dict(spec, params), args.state_dict)
            print(f"wrote {args.state_dict}: the state_dict of {torch_module(spec)}")
    except (OSError, ValueError, ImportError) as e:
        print(f"sgp_model.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
