"""Malformed use of sgp.Gossip raises a clear Python exception, never a crash: buffers of the
wrong kind (numpy and torch), settings the table refuses, a bad rank or topology, a missing
environment, and two peers whose buffers differ in size."""

import ctypes
import json
import os
import pathlib
import sys
import tempfile
import threading
import time
import unittest

import peers

np, = peers.require("numpy")
import sgp  # noqa: E402  (after the skip check)

torch = None
if "--rank" not in sys.argv:  # the workers of SizeMismatch need no torch (slow to import)
    try:
        import torch
    except ImportError:
        pass

NUMEL = 8


class DLTensor(ctypes.Structure):
    """DLPack's DLManagedTensor (dlpack.h), enough to offer a buffer on any device."""
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DeviceTensor:
    """A float32 vector that says, through __dlpack__, that it lives on DLPack device
    `device_type` (2: CUDA); its memory is a numpy array's, never read if the device is
    refused."""

    def __init__(self, device_type, numel=NUMEL):
        self.array = np.zeros(numel, dtype=np.float32)
        self.shape = (ctypes.c_int64 * 1)(numel)
        self.tensor = DLTensor(data=self.array.ctypes.data, device_type=device_type, ndim=1,
                               code=2, bits=32, lanes=1, shape=self.shape)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.tensor), b"dltensor", None)


class Misuse(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.topology = peers.one_peer_exponential(cls.tmp.name, 2)
        cls.gossip = sgp.Gossip(pathlib.Path(cls.topology), 0, NUMEL, {"timeout_ms": 1000})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def refused(self, error, pattern, buffer):
        with self.assertRaisesRegex(error, pattern):
            self.gossip.step(buffer)

    def test_numpy_buffers(self):
        self.refused(ValueError, "not C-contiguous",
                     np.zeros(2 * NUMEL, dtype=np.float32)[::2])
        self.refused(ValueError, "not C-contiguous",
                     np.zeros((NUMEL // 2, 2), dtype=np.float32).T)
        self.refused(TypeError, "expected float32 elements, got format 'd'",
                     np.zeros(NUMEL, dtype=np.float64))
        self.refused(ValueError, "holds 7 elements, but this Gossip mixes 8",
                     np.zeros(NUMEL - 1, dtype=np.float32))
        readonly = np.zeros(NUMEL, dtype=np.float32)
        readonly.flags.writeable = False
        self.refused(ValueError, "read-only", readonly)
        self.refused(ValueError, "read-only", memoryview(bytes(4 * NUMEL)).cast("f"))
        self.refused(TypeError, "expected a float32 buffer.*got <class 'list'>", [0.0] * NUMEL)
        self.assertEqual(self.gossip.iteration, 0, "a refused buffer must not count as a step")

    @unittest.skipIf(torch is None, "torch is not importable")
    def test_torch_tensors(self):
        self.refused(TypeError, "expected float32 elements",
                     torch.zeros(NUMEL, dtype=torch.float64))
        self.refused(ValueError, "not C-contiguous", torch.zeros(NUMEL, 2)[:, 0])
        self.refused(ValueError, "holds 9 elements", torch.zeros(NUMEL + 1))
        with self.assertRaisesRegex(Exception, "(?i)grad"):
            self.gossip.step(torch.zeros(NUMEL, requires_grad=True))

    def test_dlpack_devices(self):
        with sgp.Gossip(self.topology, 1, NUMEL, {"timeout_ms": 1000}) as g:
            # This build has CUDA (then: no usable GPU here) or not (then: built without CUDA).
            with self.assertRaisesRegex(ValueError, "no usable GPU|built without CUDA"):
                g.step(DeviceTensor(2))
            with self.assertRaisesRegex(ValueError, "DLPack device type 14"):
                g.step(DeviceTensor(14))
            self.assertEqual(g.iteration, 0)

    @unittest.skipIf(torch is None or not torch.cuda.is_available(), "no CUDA device")
    def test_cuda_tensor_on_the_host_engine(self):
        # A session that mixed host buffers refuses a GPU one (and vice versa).
        with sgp.Gossip(self.topology, 1, NUMEL, {"timeout_ms": 1000}) as g:
            g.publish(np.zeros(NUMEL, dtype=np.float32), 0)
            with self.assertRaisesRegex(ValueError, "earlier buffers were in host memory"):
                g.step(torch.zeros(NUMEL, device="cuda"))

    def test_publish(self):
        self.assertFalse(self.gossip.publish(np.zeros(NUMEL, dtype=np.float32), 1),
                         "without a monitor nothing is queued")
        with self.assertRaisesRegex(ValueError, r"Gossip.publish\(buffer\): .*holds 9"):
            self.gossip.publish(np.zeros(NUMEL + 1, dtype=np.float32), 1)

    def test_pause_before_the_first_step_and_after_close(self):
        g = sgp.Gossip(self.topology, 1, NUMEL, {"timeout_ms": 1000})
        g.pause()  # no engine yet: nothing to tell
        g.stay_heard()
        g.resume()
        g.close()
        g.pause()  # closed: nothing either
        g.resume()
        self.assertTrue(g.closed)

    def test_two_threads(self):
        # Rank 1 waits in step() for rank 0, which never steps; meanwhile a second thread's call
        # is refused instead of racing it.
        g = sgp.Gossip(self.topology, 1, NUMEL, {"timeout_ms": 1500})
        outcome = []
        waiting = threading.Thread(target=lambda: outcome.append(
            self.assertRaises(sgp.PeerError, g.step, np.zeros(NUMEL, dtype=np.float32))))
        waiting.start()
        time.sleep(0.3)
        with self.assertRaisesRegex(ValueError, "another thread is inside a call"):
            g.step(np.zeros(NUMEL, dtype=np.float32))
        waiting.join()
        self.assertEqual(len(outcome), 1)
        with self.assertRaisesRegex(ValueError, "failed .*close it"):
            g.step(np.zeros(NUMEL, dtype=np.float32))
        g.close()  # a failed engine is only destroyed

    def test_settings(self):
        with self.assertRaisesRegex(ValueError, "'tua' is not a setting.* tau "):
            sgp.Gossip(self.topology, 1, NUMEL, {"tua": 2})
        with self.assertRaisesRegex(ValueError, "settings: algo: .*sgp.*asgp"):
            sgp.Gossip(self.topology, 1, NUMEL, {"algo": "gossip"})
        with self.assertRaisesRegex(ValueError, "settings: tau: "):
            sgp.Gossip(self.topology, 1, NUMEL, {"tau": -1})
        with self.assertRaisesRegex(ValueError, "settings: timeout_ms: "):
            sgp.Gossip(self.topology, 1, NUMEL, {"timeout_ms": "soon"})
        with self.assertRaisesRegex(ValueError, "settings: inject: "):
            sgp.Gossip(self.topology, 1, NUMEL, {"inject": "drop=2"})
        with self.assertRaises(TypeError):
            sgp.Gossip(self.topology, 1, NUMEL, ["algo", "sgp"])

    def test_rank_topology_numel(self):
        with self.assertRaisesRegex(ValueError, "--rank 2: .* has ranks 0..1"):
            sgp.Gossip(self.topology, 2, NUMEL)
        with self.assertRaisesRegex(ValueError, "no-such.dot"):
            sgp.Gossip(os.path.join(self.tmp.name, "no-such.dot"), 0, NUMEL)
        with self.assertRaisesRegex(TypeError, "PathLike"):
            sgp.Gossip(None, 0, NUMEL)
        with self.assertRaisesRegex(ValueError, "numel: expected >= 1, got 0"):
            sgp.Gossip(self.topology, 1, 0)

    def test_environment(self):
        saved = dict(os.environ)
        try:
            for name in ("SGP_CONFIG", "SGP_TOPOLOGY", "RANK", "SLURM_PROCID", "WORLD_SIZE"):
                os.environ.pop(name, None)
            with self.assertRaisesRegex(ValueError, r"\$SGP_TOPOLOGY: not set"):
                sgp.Gossip.from_env(NUMEL)
            os.environ["SGP_TOPOLOGY"] = self.topology
            with self.assertRaisesRegex(ValueError, "no rank"):
                sgp.Gossip.from_env(NUMEL)
            os.environ["RANK"] = "one"
            with self.assertRaisesRegex(ValueError, r"\$RANK: 'one' is not a rank"):
                sgp.Gossip.from_env(NUMEL)
            os.environ["RANK"] = "1"
            os.environ["WORLD_SIZE"] = "4"
            with self.assertRaisesRegex(ValueError, r"\$WORLD_SIZE is 4, but .* has 2 peers"):
                sgp.Gossip.from_env(NUMEL)
            config = os.path.join(self.tmp.name, "config.json")
            with open(config, "w") as f:
                json.dump({"algo": "osgp", "tau": 0}, f)
            os.environ.update(WORLD_SIZE="2", SGP_CONFIG=config)
            with sgp.Gossip.from_env(NUMEL) as g:
                self.assertEqual((g.rank, g.world_size, g.algo), (1, 2, "osgp"))
            with open(config, "w") as f:
                json.dump({"tau": "x"}, f)
            with self.assertRaisesRegex(ValueError, "config.json: tau: "):
                sgp.Gossip.from_env(NUMEL)
        finally:
            os.environ.clear()
            os.environ.update(saved)


class SizeMismatch(unittest.TestCase):
    """Ranks of one topology with buffers of different sizes: each one's step fails with the
    peer error (its in-neighbour's messages are refused as bad_size until the timeout)."""

    def test_two_peers(self):
        with tempfile.TemporaryDirectory() as tmp:
            topology = peers.one_peer_exponential(tmp, 2)
            results = peers.run_ranks(__file__, 2, ["--topology", topology], timeout=30)
        for rank, (rc, result, err) in enumerate(results):
            self.assertEqual(rc, 0, peers.report(results))
            self.assertEqual(result["error"], "PeerError", peers.report(results))
            self.assertIn("bad_size", result["message"] + err, peers.report(results))


def mismatched_worker(rank, topology):
    gossip = sgp.Gossip(topology, rank, NUMEL + rank, {"timeout_ms": 1000})
    try:
        gossip.step(np.zeros(NUMEL + rank, dtype=np.float32))
        print(json.dumps({"error": None}))
    except sgp.PeerError as error:
        print(json.dumps({"error": type(error).__name__, "message": str(error)}))


if __name__ == "__main__":
    if "--rank" in sys.argv:
        mismatched_worker(int(sys.argv[sys.argv.index("--rank") + 1]),
                          sys.argv[sys.argv.index("--topology") + 1])
        sys.exit(0)
    unittest.main(verbosity=2)
