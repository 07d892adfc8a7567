"""The MuJoCo peer of benchmarks/peer.py integrates the same dynamics as geomech: the MJCF chain has
every extra effect switched off, its accelerations equal geomech's (Cartesian with constraints and
joint angles) and the closed-form joint-space equations, and a short RK4 trajectory matches."""

import importlib.util
import sys
from pathlib import Path

import mujoco
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _load_peer():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("geomech_peer", ROOT / "benchmarks" / "peer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mujoco_chain_has_nothing_but_the_pendulum():
    peer = _load_peer()
    masses, lengths, g = peer.chain_parameters(3)
    model = peer.mujoco_model(masses, lengths, g, 1e-3)
    assert model.nq == model.nv == 3 and model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
    np.testing.assert_array_equal(model.dof_damping, 0.0)
    np.testing.assert_array_equal(model.dof_armature, 0.0)
    np.testing.assert_array_equal(model.dof_frictionloss, 0.0)
    np.testing.assert_array_equal(model.jnt_stiffness, 0.0)
    np.testing.assert_allclose(model.body_mass[1:], masses, rtol=1e-15)
    for flag in ("CONTACT", "CONSTRAINT", "DAMPER", "SPRING", "FRICTIONLOSS", "LIMIT"):
        assert model.opt.disableflags & getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag}")
    np.testing.assert_allclose(model.opt.gravity, [0.0, 0.0, -g])


def test_mujoco_matches_geomech_on_a_short_horizon():
    peer = _load_peer()
    res = peer.match(2, B=4, t1=0.5, h=1e-3)
    # accelerations at the same random states (relative to the largest)
    assert res["mujoco_vs_reference_acc"] <= 1e-12, res
    assert res["geomech_joint_vs_reference_acc"] <= 1e-12, res
    assert res["geomech_cartesian_vs_mujoco_acc"] <= 1e-12, res
    # RK4 with h = 1e-3 over 0.5 s: global error O(h^4) ~ 1e-12 against the Dopri8 reference
    assert res["mujoco_vs_reference_final_state"] <= 1e-9, res
    assert res["ok"]
