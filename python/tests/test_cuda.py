"""CUDA tensors (DLPack device cuda) through the CUDA backend: two ranks in one process mix
tensors on the GPU to their exact mean in place. SKIP (77) without a CUDA build of torch and a
GPU; a build of sgp without CUDA must refuse such a tensor with a message that says so."""

import sys
import tempfile

import peers

np, torch = peers.require("numpy", "torch")
import sgp  # noqa: E402  (after the skip check)
from test_tensors import run_together  # noqa: E402

NUMEL = 300_000

if not torch.cuda.is_available():
    print(f"SKIPPED: torch {torch.__version__} sees no CUDA device (a CUDA build of torch and a GPU "
          "are needed)", flush=True)
    sys.exit(peers.SKIP)

with tempfile.TemporaryDirectory() as tmp:
    topology = peers.one_peer_exponential(tmp, 2)
    a = torch.arange(NUMEL, device="cuda", dtype=torch.float32) % 13
    b = (torch.arange(NUMEL, device="cuda", dtype=torch.float32) * 7) % 11
    mean = (a.double() + b.double()) / 2
    torch.cuda.synchronize()  # step() does not wait for torch's streams
    g0, g1 = (sgp.Gossip(topology, r, NUMEL, {"timeout_ms": 10000}) for r in range(2))
    try:
        run_together(lambda: g0.step(a), lambda: g1.step(b))
    except ValueError as error:
        if "built without CUDA" in str(error):
            print(f"sgp has no CUDA backend; the tensor was refused: {error}")
            sys.exit(0)
        raise
    assert torch.equal(a.double(), mean) and torch.equal(b.double(), mean)
    run_together(g0.close, g1.close)
print("two ranks mixed CUDA tensors to the exact mean in place")
