"""Two ranks in one process, each stepping on its own thread (step releases the GIL while it
communicates), mix a numpy array and a torch tensor (DLPack) to their exact mean in place; the
engine's w, iteration and byte counts are what one round of 2-peer push-sum gives; osgp, ring
allreduce and close(buffer) end on the mean too."""

import tempfile
import threading
import unittest

import peers

np, torch = peers.require("numpy", "torch")
import sgp  # noqa: E402  (after the skip check)

NUMEL = 300_000  # more than one 1 MiB chunk (262144 floats): two messages per round


def run_together(*actions):
    """Runs each action on its own thread; re-raises the first exception."""
    errors = []

    def guarded(action):
        try:
            action()
        except BaseException as error:  # noqa: B902  (handed to the main thread)
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(a,)) for a in actions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]


def steps_then_close(gossip, buffer, steps=3):
    for _ in range(steps):
        gossip.step(buffer)
    gossip.close(buffer)


class Tensors(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.topology = peers.one_peer_exponential(self.tmp.name, 2)
        self.a = (np.arange(NUMEL) % 13).astype(np.float32)
        self.b = torch.from_numpy(((np.arange(NUMEL) * 7) % 11).astype(np.float32))
        self.mean = (self.a.astype(np.float64) + self.b.numpy()) / 2

    def tearDown(self):
        self.tmp.cleanup()

    def sessions(self, settings):
        return [sgp.Gossip(self.topology, r, NUMEL, dict(settings, timeout_ms=10000))
                for r in range(2)]

    def test_numpy_and_torch_mix_in_place(self):
        g0, g1 = self.sessions({"algo": "sgp"})
        address = self.b.data_ptr()
        run_together(lambda: self.assertTrue(g0.step(self.a)),
                     lambda: self.assertTrue(g1.step(self.b)))
        np.testing.assert_array_equal(self.a, self.mean)
        np.testing.assert_array_equal(self.b.numpy(), self.mean)
        self.assertEqual(self.b.data_ptr(), address, "the tensor must be mixed in place")
        for g in (g0, g1):
            m = g.metrics()
            self.assertEqual((g.iteration, g.weight, m["rounds"]), (1, 1.0, 1))
            self.assertEqual(m["messages_sent"], 2)
            self.assertEqual(g.bytes_sent, 4 * NUMEL + 2 * 80)  # payload and two headers
            self.assertEqual(m["rejected"], {})
        run_together(g0.close, g1.close)
        self.assertTrue(g0.closed)
        with self.assertRaisesRegex(ValueError, "closed"):
            g0.step(self.a)

    def test_other_algorithms_end_on_the_mean(self):
        for algo in ("osgp", "allreduce"):
            with self.subTest(algo=algo):
                a, b = self.a.copy(), self.b.clone()
                g0, g1 = self.sessions({"algo": algo, "tau": 0})  # osgp: no lag
                run_together(lambda: steps_then_close(g0, a), lambda: steps_then_close(g1, b))
                np.testing.assert_allclose(a, self.mean, rtol=0, atol=1e-5)
                np.testing.assert_allclose(b.numpy(), self.mean, rtol=0, atol=1e-5)
                self.assertEqual(g0.algo, algo)


if __name__ == "__main__":
    unittest.main(verbosity=2)
