"""Helpers of the Python package's tests: skip visibly without numpy/torch, write a topology on
free loopback ports, and run N ranks as real processes of this interpreter."""

import importlib
import json
import os
import random
import socket
import subprocess
import sys
import time

SKIP = 77  # meson's exit code for a skipped test


def require(*modules):
    """Imports each module, or exits 77 (SKIP) naming the one that is missing."""
    loaded = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except ImportError as error:
            print(f"SKIPPED: {name} is not importable by {sys.executable} ({error}); "
                  "scripts/setup installs python3-numpy and python3-torch", flush=True)
            sys.exit(SKIP)
    return loaded


def free_ports(count):
    """`count` distinct free loopback ports, drawn from 10000 up to the kernel's ephemeral range
    (whose ports any outgoing connection may take before a peer binds them), as sgp's own
    free_local_endpoints does; each stays bound until all are known."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            highest = int(f.read().split()[0]) - 1
    except (OSError, ValueError, IndexError):
        highest = 32767
    sockets = []
    try:
        for _ in range(100 * count):
            if len(sockets) == count:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", random.randint(10000, highest)))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        if len(sockets) < count:
            raise OSError(f"no {count} free ports between 10000 and {highest} on 127.0.0.1")
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class HeldPorts:
    """A socket listening on a port the OS picked, per rank, handed to each rank's process as
    `sgp launch` hands its peers theirs ($SGP_LISTEN_FD, taken over by the native transport):
    no other process can take a port between the pick and the rank's start (a Python rank takes
    seconds to import torch)."""

    def __init__(self, count):
        self.sockets = []
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(100)
            self.sockets.append(s)
        self.ports = [s.getsockname()[1] for s in self.sockets]

    def close(self):
        """Closes this process's copies (the ranks hold theirs)."""
        for s in self.sockets:
            s.close()


def one_peer_exponential(directory, peers=4, launch=False, ports=None):
    """The one-peer exponential graph over `peers` (a power of two) loopback ranks: in phase k
    rank i pushes half of its mass to i + 2^k, so after log2(peers) rounds every rank holds the
    exact mean of dyadic values. With `launch`, every port is 0: `sgp launch` picks them and
    holds each until its rank listens, so that no other test can take one first. `ports`: the
    ports of a HeldPorts (else free ports, released before the ranks bind them)."""
    period = peers.bit_length() - 1
    lines = ["digraph topology {", f"  period = {period};"]
    if ports is None:
        ports = [0] * peers if launch else free_ports(peers)
    for rank, port in enumerate(ports):
        lines.append(f'  {rank} [endpoint="tcp://127.0.0.1:{port}"];')
    for phase in range(period):
        for rank in range(peers):
            lines.append(f"  {rank} -> {(rank + 2 ** phase) % peers} [phase={phase}];")
    lines.append("}")
    path = os.path.join(directory, f"one-peer-exponential-{peers}.dot")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def barrier(directory, rank, peers, timeout=30):
    """Returns once every rank has called it with the same directory (each leaves a file)."""
    open(os.path.join(directory, f"ready-{rank}"), "w").close()
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(os.path.join(directory, f"ready-{r}")) for r in range(peers)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: the other ranks did not start in {timeout} s")
        time.sleep(0.01)


def run_ranks(script, peers, arguments, timeout=30, held=None):
    """Runs `script --rank R ARGUMENTS` for each rank at once, each with its socket of `held`
    (a HeldPorts) if given; returns [(exit code, the JSON of the last stdout line or None,
    stderr)] by rank."""
    processes = []
    for rank in range(peers):
        env, fds = dict(os.environ), ()
        if held:
            fds = (held.sockets[rank].fileno(),)
            env["SGP_LISTEN_FD"] = str(fds[0])
        processes.append(subprocess.Popen(
            [sys.executable, script, "--rank", str(rank), *arguments], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env, pass_fds=fds))
    if held:
        held.close()
    results = []
    deadline = time.monotonic() + timeout
    for p in processes:
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in processes:
                q.kill()
            raise AssertionError(f"rank {processes.index(p)} did not finish in {timeout} s")
        lines = out.strip().splitlines()
        try:
            result = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            result = None
        results.append((p.returncode, result, err))
    return results


def report(results):
    """The ranks' exit codes and last lines of stderr, for an assertion's message."""
    return "\n".join(f"rank {r}: exit {rc}, result {res}\n  " + "\n  ".join(err.splitlines()[-8:])
                     for r, (rc, res, err) in enumerate(results))
