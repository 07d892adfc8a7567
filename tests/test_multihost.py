"""One sharded ensemble across two JAX processes (multi-controller, as on a cluster) equals the
single-process run bit for bit.

Two CPU processes on this machine join through `jax.distributed.initialize` with a coordinator on
the loopback interface (bound to 127.0.0.1 only), two CPU devices each, so the global `Mesh` has
four devices over two processes. Each process supplies only its own half of the batch
(`jax.make_array_from_process_local_data`, as docs/multi_device.md shows); the gathered solution
must equal the unsharded `gm.simulate` of the whole batch in a single process (a third one, run
beside them with the same XLA settings). Every step is bounded in
time (the coordinator's initialization, heartbeat and shutdown timeouts, and the subprocess
timeout here), so a stuck peer ends the test instead of hanging it. CPU collectives use gloo
(`jax_cpu_collectives_implementation`, JAX's default).
"""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import diffrax
import jax.numpy as jnp
import numpy as np

import geomech as gm
from geomech.models import CartesianPendulum

ROOT = Path(__file__).resolve().parents[1]
B = 8
T1 = 1.0
TIMEOUT_S = 300

WORKER = textwrap.dedent(
    """
    import sys
    import jax
    process_id, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_num_cpu_devices", 2)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        coordinator_bind_address=f"127.0.0.1:{port}",
        num_processes=2,
        process_id=process_id,
        initialization_timeout=120,
        heartbeat_timeout_seconds=30,
        shutdown_timeout_seconds=30,
    )
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import geomech as gm
    from test_multihost import initial_states, simulate

    assert jax.process_count() == 2 and jax.device_count() == 4, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    sharding = NamedSharding(mesh, P("batch"))
    q, v = initial_states()
    half = q.shape[0] // 2
    rows = slice(process_id * half, (process_id + 1) * half)  # this process's rows only
    y0 = gm.State(
        jax.make_array_from_process_local_data(sharding, q[rows]),
        jax.make_array_from_process_local_data(sharding, v[rows]),
    )
    sol = simulate(y0, sharding)
    assert len(sol.states.q.addressable_shards) == 2  # each process holds its own trajectories
    leaves = [multihost_utils.process_allgather(x, tiled=True) for x in jax.tree.leaves(sol)]
    if process_id == 0:
        np.savez(out, *leaves)
    print("MULTIHOST_OK", process_id, flush=True)
    """
)


def initial_states():
    """The global batch, as NumPy arrays (every process builds the same)."""
    theta, omega = np.linspace(0.1, 1.2, B), np.linspace(-1.0, 1.0, B)
    q = np.stack([np.cos(theta), np.sin(theta)], -1)
    v = omega[:, None] * np.stack([-np.sin(theta), np.cos(theta)], -1)
    return q, v


def simulate(y0, sharding=None):
    saveat = diffrax.SaveAt(ts=jnp.linspace(0.0, T1, 4))
    return gm.simulate(CartesianPendulum()(), y0, 0.0, T1, saveat=saveat, sharding=sharding)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


REFERENCE = textwrap.dedent(
    """
    import sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    import geomech as gm
    from test_multihost import initial_states, simulate

    import diffrax
    from test_multihost import B

    q, v = initial_states()
    ref = simulate(gm.State(jnp.asarray(q), jnp.asarray(v)))
    assert ref.states.q.shape == (B, 4, 2) and np.all(np.isfinite(np.asarray(ref.states.v)))
    assert bool(jnp.all(ref.result == diffrax.RESULTS.successful))
    np.savez(sys.argv[1], *jax.tree.leaves(ref))
    print("REFERENCE_OK", flush=True)
    """
)


def test_two_processes_one_sharded_ensemble(tmp_path):
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    # XLA's defaults, one device per process, in the workers and in the single-process reference
    # (which runs beside them: bit equality holds for the same code generator, and the test
    # process may use another, see conftest.py)
    env.pop("XLA_FLAGS", None)
    paths = (str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", ""))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    port, out, ref = _free_port(), tmp_path / "sharded.npz", tmp_path / "reference.npz"
    commands = [[WORKER, str(i), str(port), str(out)] for i in range(2)] + [[REFERENCE, str(ref)]]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", *command],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for command in commands
    ]
    try:
        logs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    oks = [f"MULTIHOST_OK {i}" for i in range(2)] + ["REFERENCE_OK"]
    for p, log, ok in zip(procs, logs, oks, strict=True):
        assert p.returncode == 0 and ok in log, log[-3000:]
    with np.load(out) as data:
        got = [data[f"arr_{i}"] for i in range(len(data.files))]
    with np.load(ref) as data:
        expected = [data[f"arr_{i}"] for i in range(len(data.files))]
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)  # bit-identical
