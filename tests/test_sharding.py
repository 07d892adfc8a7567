"""simulate(..., sharding=...) over 4 virtual CPU devices equals the unsharded ensemble.

The device count is fixed when JAX starts, so the check runs in a subprocess with
XLA_FLAGS=--xla_force_host_platform_device_count=4. It also pins XLA's CPU code generation to
SSE4.2 (`--xla_cpu_max_isa`): with AVX2/FMA, LLVM contracts a multiply and an add into one FMA
where a fused loop allows it, and the SPMD-partitioned program is fused differently from the
unsharded one, so a heavy top on SO(3) differed in the last bit (4e-16 after one Tsit5 step;
bit-identical with the ISA pinned, measured). What is tested is geomech's part, bit for bit: the
padding, the split over devices, the per-trajectory independence and the trimming.
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

# the same on a Lie group: an ensemble of heavy tops on SO(3) (jaxlie points, Munthe-Kaas steps)
GROUP_SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, jaxlie, numpy as np, diffrax
    jax.config.update("jax_enable_x64", True)
    from jax.sharding import Mesh
    import geomech as gm

    assert jax.device_count() == 4, jax.devices()
    E3, I = jnp.array([0.0, 0.0, 1.0]), jnp.diag(jnp.array([1.0, 1.6, 2.3]))
    L = lambda R, w: 0.5 * w @ I @ w - 1.3 * R.apply(E3) @ E3
    top = gm.LagrangianSystem(L, manifold=gm.SO3())
    B = 6  # padded to 8 and trimmed
    axis = jnp.stack([jnp.linspace(0.1, 1.0, B), jnp.zeros(B), jnp.linspace(-0.5, 0.5, B)], -1)
    y0 = gm.State(jaxlie.SO3.exp(axis), jnp.stack([jnp.linspace(-1, 1, B), jnp.ones(B), 3 * jnp.ones(B)], -1))
    kw = dict(saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 4)))
    ref = gm.simulate(top, y0, 0.0, 1.0, **kw)
    out = gm.simulate(top, y0, 0.0, 1.0, sharding=Mesh(np.array(jax.devices()), ("batch",)), **kw)
    assert isinstance(out.states.q, jaxlie.SO3) and out.states.q.wxyz.shape == (B, 4, 4)
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert bool(jnp.all(out.result == diffrax.RESULTS.successful))
    print("SHARDED_OK")
    """
)


def _run_on_four_devices(script):
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "")
        + " --xla_force_host_platform_device_count=4 --xla_cpu_max_isa=SSE4_2"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SHARDED_OK" in proc.stdout


def test_sharded_ensemble_equals_unsharded():
    _run_on_four_devices(SCRIPT)


def test_sharded_ensemble_on_a_lie_group_equals_unsharded():
    _run_on_four_devices(GROUP_SCRIPT)
