"""simulate(..., sharding=...) over 4 virtual CPU devices equals the unsharded ensemble.

The device count is fixed when JAX starts, so the check runs in a subprocess with
XLA_FLAGS=--xla_force_host_platform_device_count=4.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numpy as np, diffrax
    jax.config.update("jax_enable_x64", True)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding
    import geomech as gm
    from geomech.models import CartesianPendulum

    assert jax.device_count() == 4, jax.devices()
    system = CartesianPendulum()()
    B = 6  # not a multiple of 4: padded to 8 and trimmed
    theta, omega = jnp.linspace(0.1, 1.2, B), jnp.linspace(-1.0, 1.0, B)
    e_r = jnp.stack([jnp.cos(theta), jnp.sin(theta)], -1)
    e_t = jnp.stack([-jnp.sin(theta), jnp.cos(theta)], -1)
    y0 = gm.State(e_r, omega[:, None] * e_t)
    kw = dict(saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 4)), stabilization="projection")
    ref = gm.simulate(system, y0, 0.0, 1.0, **kw)
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    out = gm.simulate(system, y0, 0.0, 1.0, sharding=mesh, **kw)
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert bool(jnp.all(out.result == diffrax.RESULTS.successful))
    assert out.states.q.shape == (B, 4, 2)
    # a NamedSharding of the batch axis: the same shard_map
    named = NamedSharding(mesh, PartitionSpec("batch"))
    out = gm.simulate(system, y0, 0.0, 1.0, sharding=named, **kw)
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # the batch split over both axes of a 2 x 2 mesh
    grid = Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))
    out = gm.simulate(
        system, y0, 0.0, 1.0, sharding=NamedSharding(grid, PartitionSpec(("a", "b"))), **kw
    )
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # any other Sharding places the batch and lets XLA partition
    one = gm.simulate(system, y0, 0.0, 1.0, sharding=SingleDeviceSharding(jax.devices()[2]), **kw)
    np.testing.assert_array_equal(np.asarray(one.states.v), np.asarray(ref.states.v))
    print("SHARDED_OK")
    """
)


def test_sharded_ensemble_equals_unsharded():
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SHARDED_OK" in proc.stdout
