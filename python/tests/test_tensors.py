"""Two ranks in one process, each stepping on its own thread (step releases the GIL while it
communicates), mix a numpy array and a torch tensor (DLPack) to their exact mean in place; the
engine's w, iteration and byte counts are what one round of 2-peer push-sum gives; osgp, ring
allreduce and bf16-compressed sgp end on the mean too; attached buffers (no copies) mix like others
on a schedule whose weights move away from 1."""

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
        # osgp without lag; bf16 payloads carry these small integers exactly.
        for settings in ({"algo": "osgp", "tau": 0}, {"algo": "allreduce"},
                         {"algo": "sgp", "compress": "bf16"}):
            with self.subTest(**settings):
                algo = settings["algo"]
                a, b = self.a.copy(), self.b.clone()
                g0, g1 = self.sessions(settings)
                run_together(lambda: steps_then_close(g0, a), lambda: steps_then_close(g1, b))
                np.testing.assert_allclose(a, self.mean, rtol=0, atol=1e-5)
                np.testing.assert_allclose(b.numpy(), self.mean, rtol=0, atol=1e-5)
                self.assertEqual(g0.algo, algo)


def directed_triangle(directory):
    """3 ranks whose equal shares make a column- but not row-stochastic schedule: w moves away
    from 1, so z = x / w is where a wrong scale would show."""
    ports = peers.free_ports(3)
    nodes = "".join(f'  {r} [endpoint="tcp://127.0.0.1:{p}"];\n' for r, p in enumerate(ports))
    path = f"{directory}/triangle.dot"
    with open(path, "w") as f:
        f.write("digraph t {\n" + nodes + "  0 -> 1;\n  0 -> 2;\n  1 -> 2;\n  2 -> 0;\n}\n")
    return path


class Attached(unittest.TestCase):
    """attach(): the engine mixes the caller's buffer itself (no copies), also while w != 1."""

    def mix(self, attach, steps=60):
        with tempfile.TemporaryDirectory() as tmp:
            topology = directed_triangle(tmp)
            zs = [np.full(NUMEL, 3.0 * r, dtype=np.float32) for r in range(2)]
            zs.append(torch.full((NUMEL,), 12.0))
            gossips = [sgp.Gossip(topology, r, NUMEL, {"timeout_ms": 10000}) for r in range(3)]
            if attach:
                for g, z in zip(gossips, zs):
                    g.attach(z)
                with self.assertRaisesRegex(ValueError, "the buffer given to attach"):
                    gossips[0].step(zs[0].copy())
            weights = []

            def run(g, z):
                for _ in range(steps):
                    g.step(z)
                    weights.append(g.weight)
                g.close()  # an attached buffer gets its final z without being named

            run_together(*(lambda g=g, z=z: run(g, z) for g, z in zip(gossips, zs)))
            return [np.asarray(z) for z in zs], weights

    def test_attached_and_copied_buffers_mix_alike(self):
        for attach in (False, True):
            with self.subTest(attach=attach):
                zs, weights = self.mix(attach)
                self.assertTrue(any(abs(w - 1) > 0.1 for w in weights), weights[:6])
                for z in zs:
                    np.testing.assert_allclose(z, 5.0, rtol=0, atol=1e-4)


if __name__ == "__main__":
    unittest.main(verbosity=2)
