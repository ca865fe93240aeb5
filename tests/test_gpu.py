"""The OpenCL offload (issue 34; docs/gpu.md) on whatever OpenCL device the machine has: PoCL's CPU device in CI
(`pip install ".[gpu]"` brings pyopencl and pocl-binary-distribution). Without pyopencl or a device these tests skip,
saying so; .ci/run sets PETIT_REQUIRE_OPENCL=1, under which they fail instead.

- Each kernel (q8_0, q4_0) against the scalar path at odd sizes: within 1e-5 of the output's range (the float sums
  in another order), bit for bit with one work-item per output (the scalar path's order), and against the CPU's
  own product (petit.native.matmul, the active SIMD path).
- Logits with the offload equal the CPU path's on the dense fixtures (tests/fixtures/hf, hf5_dense) at q8_0 and
  q4_0, prefill and decode, all layers and some: the same integers in both, so the bound is 1e-4 of the logit range,
  far inside the weight types' own bounds against float32 (0.08 / 0.60); greedy tokens equal.
- The flags on run / chat / serve, `petit info`'s listing, and the refusals (no device, no q8_0 / q4_0 matrix, a
  family outside the decoder).
"""
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.cli import main
from petit.native import matmul, quantize, Weight

REQUIRED = os.environ.get("PETIT_REQUIRE_OPENCL") == "1"
FIX = Path(__file__).parent / "fixtures"
DENSE_DIRS = [FIX / "hf", FIX / "hf5_dense"]
TOL = 1e-4


def _device():
    """The device --gpu would use with its kernels built and checked; a skip (a failure under
    PETIT_REQUIRE_OPENCL=1) when there is none."""
    from petit.gpu import GpuUnavailable, start
    try:
        return start()
    except GpuUnavailable as e:
        if REQUIRED:
            pytest.fail(f"PETIT_REQUIRE_OPENCL=1 but no OpenCL device runs the offload: {e}")
        pytest.skip(f"no OpenCL device runs the offload here: {e}")


@pytest.fixture(scope="module")
def device():
    return _device()


def _dense_folders() -> list[Path]:
    out = []
    for d in DENSE_DIRS:
        for p in sorted(d.iterdir()):
            if (p / "config.json").is_file() and (p / "reference.npz").is_file():
                out.append(p)
    return out


def _load(folder, weights):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return petit.load(folder, weights=weights)


def _is_dense(model) -> bool:
    from petit.gpu.offload import DENSE_KINDS
    from petit.models.decoder import Decoder
    return isinstance(model.net, Decoder) and not model.net.plan_kinds() - DENSE_KINDS


# ---- the kernels ----
@pytest.mark.parametrize("dtype", ["q8_0", "q4_0"])
@pytest.mark.parametrize("rows, blocks, T", [(1, 1, 1), (7, 5, 3), (13, 3, 1), (33, 7, 5), (65, 9, 2)])
def test_each_kernel_equals_the_scalar_path_at_odd_sizes(device, dtype, rows, blocks, T):
    from petit.gpu.kernels import _scalar_order, reference
    _, k = device
    rng = np.random.default_rng(rows * 100 + blocks * 10 + T)
    cols = 32 * blocks
    w = rng.standard_normal((rows, cols)).astype(np.float32)
    x = rng.standard_normal((T, cols)).astype(np.float32)
    raw = quantize(w, dtype)
    act = k.put_act(x)
    got = np.empty((T, rows), np.float32)
    k.matmul(dtype, k.upload(raw), rows, act, got)
    ref = reference(dtype, raw, rows, cols, x)
    span = np.abs(ref).max()
    assert np.abs(got - ref).max() <= 1e-5 * span
    one = np.empty((T, rows), np.float32)
    k.matmul(dtype, k.upload(raw), rows, act, one, group=1)
    np.testing.assert_array_equal(one, _scalar_order(dtype, raw, rows, cols, x))
    cpu = matmul(Weight(raw, dtype, (rows, cols)), x)
    assert np.abs(got - cpu).max() <= 1e-5 * span


def test_the_start_up_check_passes_and_catches_a_wrong_kernel(device, monkeypatch):
    from petit.gpu import kernels
    _, k = device
    assert kernels.self_check(k) is None
    real = k.matmul

    def off_by_a_bit(dtype, wbuf, rows, act, out, slot=0, group=None):
        real(dtype, wbuf, rows, act, out, slot, group)
        out *= np.float32(1.001)
    monkeypatch.setattr(k, "matmul", off_by_a_bit)
    why = kernels.self_check(k)
    assert why is not None and "disagrees with the scalar path" in why


# ---- logits ----
FOLDERS = _dense_folders()


@pytest.mark.parametrize("weights", ["q8_0", "q4_0"])
@pytest.mark.parametrize("folder", FOLDERS, ids=[f"{p.parent.name}/{p.name}" for p in FOLDERS])
def test_logits_with_the_offload_equal_the_cpu_path(device, folder, weights):
    from petit.gpu import attach, detach
    model = _load(folder, weights)
    if not _is_dense(model):
        pytest.skip(f"{folder.name} is not a dense decoder (MoE / hybrid offload is left for later)")
    ids = np.load(folder / "reference.npz")["input_ids"]
    cpu = model.logits(ids)
    off = attach(model)
    assert off.n_layers == model.n_layers and off.matrices
    gpu = model.logits(ids)
    span = cpu.max(axis=1) - cpu.min(axis=1)
    err = np.abs(gpu - cpu).max(axis=1) / span
    assert err.max() <= TOL, f"position {err.argmax()}: {err.max():.2e} of the range"
    assert (gpu.argmax(axis=1) == cpu.argmax(axis=1)).all()
    # decode: a prefill of the prompt, then one token a step (T = 1 products), greedy, against the CPU's
    detach(model)
    want = _greedy(model, ids, 5)
    attach(model, layers=max(1, model.n_layers // 2))      # some layers on the device, the LM head on the CPU
    assert _greedy(model, ids, 5) == want
    detach(model)


def _greedy(model, ids, n):
    cache = model.new_cache(len(ids) + n + 1)
    logits = model.forward(ids, cache)
    out = []
    for _ in range(n):
        t = int(np.argmax(logits))
        out.append(t)
        logits = model.forward([t], cache)
    return out


def test_a_batch_of_sequences_runs_through_the_offload(device):
    from petit.gpu import attach
    model = _load(FIX / "hf" / "llama", "q8_0")
    a, b = [1, 5, 9, 2], [3, 4]
    cpu = model.forward_batch([(a, model.new_cache(8)), (b, model.new_cache(8))], all_logits=True)
    attach(model)
    gpu = model.forward_batch([(a, model.new_cache(8)), (b, model.new_cache(8))], all_logits=True)
    for c, g in zip(cpu, gpu):
        assert np.abs(g - c).max() <= TOL * (c.max() - c.min())


# ---- refusals ----
def test_a_model_without_q8_0_or_q4_0_matrices_is_refused(device):
    from petit.gpu import GpuUnavailable, attach
    model = _load(FIX / "hf" / "llama", "f32")
    with pytest.raises(GpuUnavailable, match="q8_0 / q4_0"):
        attach(model)
    assert model.net.offload is None


def test_a_device_that_is_not_there_is_named(device):
    from petit.gpu import GpuUnavailable, attach
    model = _load(FIX / "hf" / "llama", "q8_0")
    with pytest.raises(GpuUnavailable, match="no OpenCL device 7 on platform 9"):
        attach(model, platform=9, device=7)


def test_a_moe_family_is_left_for_later(device):
    from petit.gpu import GpuUnavailable, attach
    model = _load(FIX / "hf_moe" / "granitemoe", "q8_0")
    with pytest.raises(GpuUnavailable, match="moe: the offload of the MoE, hybrid and latent-attention families is "
                                             "left for later"):
        attach(model)
    assert model.net.offload is None


def test_a_net_that_is_not_the_decoder_is_refused():
    from petit.gpu import GpuUnavailable, attach
    with pytest.raises(GpuUnavailable, match="does not run the decoder's plan"):
        attach(type("M", (), {"net": object()})())


def test_zero_layers_leaves_only_the_cpu(device):
    from petit.gpu import GpuUnavailable, attach
    with pytest.raises(GpuUnavailable, match="--gpu-layers 0"):
        attach(_load(FIX / "hf" / "llama", "q8_0"), layers=0)


# ---- the command line ----
def test_run_with_gpu_prints_what_the_cpu_prints(device, capsys):
    folder = str(FIX / "hf" / "llama")
    argv = ["run", folder, "-p", "hello", "-n", "6", "-t", "0", "--weights", "q8_0"]
    assert main(argv + ["--cpu"]) == 0
    cpu = capsys.readouterr().out
    assert main(argv + ["--gpu"]) == 0
    out = capsys.readouterr()
    assert out.out == cpu
    assert "petit run: gpu: " in out.err and "layers' matrices" in out.err
    assert main(argv + ["--gpu-layers", "1"]) == 0       # implies --gpu
    out = capsys.readouterr()
    assert out.out == cpu and "1 of " in out.err


def test_gpu_flags_with_cpu_are_a_usage_error(capsys):
    folder = str(FIX / "hf" / "llama")
    for cmd in (["run", folder, "-p", "hi"], ["chat", folder], ["serve", folder]):
        assert main(cmd + ["--cpu", "--gpu-device", "0"]) == 2
        assert "--cpu cannot be combined with --gpu-device" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            main(cmd + ["--cpu", "--gpu"])
        capsys.readouterr()


def test_info_lists_the_devices(device, capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    dev, _ = device
    assert "opencl:" in out and dev.name in out
    assert "gpu offload:    off unless --gpu" in out and "start-up check passed" in out


def test_info_without_pyopencl_says_how_to_get_it(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "pyopencl", None)       # import pyopencl raises ImportError
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "opencl:         none (pyopencl is not installed" in out and 'pip install "petit[gpu]"' in out
