"""Reads an sgp model file (peer-<rank>-model.bin, model-average.bin; the format is in
include/sgp/run/model_file.hpp), with Python's standard library only:

    import sgp_model
    spec, params = sgp_model.read("runs/x/model-average.bin")   # "mlp:512,512", array('f')
    weights = numpy.asarray(params)                               # if numpy is wanted

Run as a script, prints the spec, the parameter count and their norm."""
import array
import math
import struct
import sys

MAGIC = b"SGPMODEL"
VERSION = 1


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


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.strip())
        sys.exit(2)
    spec, params = read(sys.argv[1])
    norm = math.sqrt(math.fsum(p * p for p in params))
    print(f"{sys.argv[1]}: model {spec}, {len(params)} parameters, norm {norm:.6g}")
