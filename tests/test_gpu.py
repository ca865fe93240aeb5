"""The OpenCL offload (issue 34; docs/gpu.md) on whatever OpenCL device the machine has: PoCL's CPU device in CI
(`pip install ".[gpu]"` brings pyopencl and pocl-binary-distribution). Without pyopencl or a device these tests skip,
saying so; .ci/run sets PETIT_REQUIRE_OPENCL=1, under which they fail instead.

- Each kernel (q8_0, q4_0) against the scalar path at odd sizes: within 1e-5 of the output's range (the float sums
  in another order), bit for bit with one work-item per output (the scalar path's order), and against the CPU's
  own product (petit.native.matmul, the active SIMD path).
- Logits with the offload equal the CPU path's on the dense fixtures (tests/fixtures/hf, hf_more, hf5_dense,
  hf5_wrap) at q8_0 and q4_0 and on one fixture of each model_type of the MoE, latent-attention, hybrid and
  recurrent kinds at q8_0 (a subset at q4_0), prefill and decode, all layers and half of them: bit for bit the
  scalar path's with one work-item per output, and within 0.03 of the logit range of the active path's as the
  kernels run (inside q8_0's own 0.08), before any position that routes otherwise (none does).
- The flags on run / chat / serve, `petit info`'s listing, the memory budget, what stays on the CPU and why, and
  the refusals (no device, no matrix the kernels take, a net outside the decoder).
"""
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import petit
from petit.cli import main
from petit.gpu.kernels import GROUP
from petit.native import matmul, quantize, Weight

from models import TINY, routing_choices, write_model

REQUIRED = os.environ.get("PETIT_REQUIRE_OPENCL") == "1"
FIX = Path(__file__).parent / "fixtures"
DENSE_DIRS = [FIX / "hf", FIX / "hf_more", FIX / "hf5_dense", FIX / "hf5_wrap"]     # the folders with dense families
# the kinds beyond the dense decoder (petit/models/families/<kind>/): routed experts, latent attention, state-space
# and linear-attention mixers beside attention, recurrent models; one fixture of each model_type in any tests/
# fixtures/hf* folder (hf5_mm's multimodal rows hold their text families' weights)
OTHER_KINDS = ("moe", "mla", "hybrid", "recurrent")
# those at q4_0 too (CI's budget: one of each kind of op the plan holds beside the products): softmax experts with a
# shared one, latent attention, Mamba and DeltaNet hybrids, a recurrent model, Zamba's shared blocks, the DSA,
# block-sparse and DeepSeek-V4 indexers, JetMoE's attention experts, gpt-oss's sinks, Inkling 2's ops, Qwen4-Exp's
Q4_0_OTHERS = {"qwen2_moe", "deepseek_v3", "jamba", "qwen3_next", "falcon_h1", "rwkv7", "zamba2", "dots3_note_text",
               "minimax_m3_vl_text", "deepseek_v4", "jetmoe", "gpt_oss", "inkling2_text", "qwen4_exp_text"}
TOL = 1e-4         # the CPU path and the device on the same step: the float sums in another order
FLIP_TOL = 0.03    # a whole model: an activation one int8 code apart somewhere (see the test)
KERNEL_TYPES = "q8_0 / q4_0 / q4_k / q5_k / q6_k"     # what a message says the kernels take
ROUTED = 0.9       # the share of positions whose routing the device's run must keep (measured: all of them)


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


def _folders(dirs) -> list[Path]:
    return [p for d in dirs for p in sorted(d.iterdir())
            if (p / "config.json").is_file() and (p / "reference.npz").is_file()]


def _other_folders() -> list[Path]:
    """One fixture folder of each model_type of OTHER_KINDS (the first in the folders' order)."""
    import json

    from petit.models.families import table
    kinds = {t: module.split(".")[1] for t, module in table().items()}
    dirs = [d for d in sorted(FIX.glob("hf*")) if d.is_dir() and d not in DENSE_DIRS and d.name != "hf5_mm"]
    out = {}
    for p in _folders(dirs):
        model_type = json.loads((p / "config.json").read_text())["model_type"]
        if kinds.get(model_type) in OTHER_KINDS:
            out.setdefault(model_type, p)
    return list(out.values())


def _load(folder, weights, repack=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return petit.load(folder, weights=weights, repack=repack)


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


@pytest.mark.parametrize("dtype", ["q4_k", "q5_k", "q6_k"])
@pytest.mark.parametrize("rows, blocks, T", [(1, 1, 1), (7, 2, 3), (13, 3, 1), (33, 1, 5), (65, 2, 2)])
def test_each_k_quant_kernel_equals_the_scalar_path_at_odd_sizes(device, dtype, rows, blocks, T):
    """Q4_K / Q5_K / Q6_K in GGUF's super-blocks (`blocks` of 256 values a row), against activations quantized as
    the CPU quantizes them for these (one scale per 256 values): with one work-item per output the scalar path's
    product bit for bit, as the kernels run within 1e-5 of its range. The CPU's active path gives the scalar path's
    bits for these types (kernels/kern_gguf.h), so the device equals it too."""
    from petit import native
    _, k = device
    rng = np.random.default_rng(rows * 100 + blocks * 10 + T)
    cols = 256 * blocks
    x = rng.standard_normal((T, cols)).astype(np.float32)
    W = Weight(quantize(rng.standard_normal((rows, cols)).astype(np.float32), dtype), dtype, (rows, cols))
    act, wbuf = k.put_act(x, kq=True), k.upload(W.raw)
    got, one = np.empty((T, rows), np.float32), np.empty((T, rows), np.float32)
    k.matmul(dtype, wbuf, rows, act, got)
    k.matmul(dtype, wbuf, rows, act, one, group=1)
    cpu = matmul(W, x)
    native.configure(isa="scalar")
    try:
        scalar = matmul(W, x)
    finally:
        native.configure()
    np.testing.assert_array_equal(cpu, scalar)
    np.testing.assert_array_equal(one, scalar)
    assert np.abs(got - scalar).max() <= 1e-5 * np.abs(scalar).max()
    with pytest.raises(ValueError, match=f"a {dtype} matrix takes activations put with kq=True"):
        k.launch(dtype, wbuf, rows, k.put_act(x))


@pytest.mark.parametrize("K_", [256, 4096])
def test_the_k_quants_activations_are_the_cpus(K_):
    """What the K-quant kernels are sent: pt_quant_act_k's (Q8_K's rule: one scale per 256 values; plain C on every
    CPU path) codes, scales and block sums, tests/oracles.py's, and the sums of 16."""
    import oracles
    from petit.gpu.kernels import quantize_act_k
    rng = np.random.default_rng(K_)
    x = (rng.standard_normal((3, K_)) * rng.uniform(0.01, 100)).astype(np.float32)
    x[1, :256] = 0.0
    x[2, -256:] = np.linspace(-127.0, 127.0, 256, dtype=np.float32)     # d = 1: the codes are the values rounded
    x[2, -33:-1] = np.arange(32, dtype=np.float32) - 15.5                 # ties: round half to even
    q, d, s, h = quantize_act_k(x)
    eq, ed, es = oracles.quantize_act_k(x)
    assert np.array_equal(q, eq) and np.array_equal(d, ed) and np.array_equal(s, es)
    assert np.array_equal(h, q.reshape(3, -1, 16).astype(np.int32).sum(axis=2))
    with pytest.raises(ValueError, match="rows of a multiple of 256 values, not 96"):
        quantize_act_k(np.zeros((1, 96), np.float32))


def test_the_start_up_check_runs_the_k_quant_kernels_too(device, monkeypatch):
    """A device whose Q6_K kernel reads the blocks wrongly (here: Q5_K's reading of them) is not used."""
    from petit.gpu import kernels
    _, k = device
    monkeypatch.setitem(k.kernels, "q6_k", k.kernels["q5_k"])
    why = kernels.self_check(k)
    assert why is not None and why.startswith("the q6_k kernel disagrees with the scalar path (relative error")


@pytest.mark.parametrize("stored", [True, None], ids=["as-stored", "as-loaded"])
@pytest.mark.parametrize("dtype", ["q4_k", "q5_k", "q6_k"])
def test_a_k_quant_gguf_file_gives_the_cpu_paths_logits(device, dtype, stored):
    """llama.cpp's own Q4_K / Q5_K / Q6_K files of the GPT-2 fixture (tests/fixtures/gguf: its MLP-down matrices,
    256 values a row, in that type; the others in llama.cpp's fallback, Q5_0 / Q5_1 / Q8_0). As stored, the K-quant
    matrices (and the q8_0 ones) go to the device, the Q5_0 / Q5_1 ones stay on the CPU, named; as a load gives them
    by default (on x86 the K-quants as stored, the Q5_0 / Q5_1 decoded to q8_0), all of them. Against the active
    CPU path within FLIP_TOL as the kernels run; with one work-item per output the scalar path's logits bit for
    bit."""
    from petit import native
    from petit.models.blocks.plan import address
    folder = FIX / "gguf" / "gpt2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = petit.load(folder / f"{dtype}.gguf", gguf_stored=stored)
    ids = np.load(folder / f"{dtype}.npz")["input_ids"]
    kq = [W for W in model.net.matrices() if W.dtype == dtype]
    others = sorted({W.dtype for W in model.net.matrices()} - {dtype, "q8_0"})
    kept = stored or dtype.upper() in native.gguf_fast_types()      # else decoded to q8_0 at load

    def holds(off):
        assert len(kq) == (2 if kept else 0) and all(address(W.c) in off.matrices for W in kq)
        assert [s.split(": ")[1].split(" ")[0] for s in off.skipped if " layers " in s] == others
    _as_on_the_cpu(model, ids, device[1], holds)


@pytest.mark.parametrize("dtype", ["q4_k", "q5_k", "q6_k"])
def test_a_k_quant_model_over_several_super_blocks_gives_the_cpu_paths_logits(device, dtype, tmp_path):
    """A random Llama written in one K-quant, 512 values wide with an MLP of 768 (2 and 3 super-blocks a row, which
    the fixtures' 64-256 do not reach): every product and the LM head on the device, within FLIP_TOL of the CPU
    path's logits as the kernels run (a sum one ulp apart can round a later activation to the neighbouring code:
    Q5_K's moves 7e-4 of the range, the others 1e-7), bit for bit the scalar path's with one work-item."""
    cfg = dict(TINY, hidden_size=512, intermediate_size=768, num_attention_heads=8, num_key_value_heads=4,
               head_dim=64)
    write_model(tmp_path / "m.petit", cfg, dtype=dtype)
    model = petit.load(tmp_path / "m.petit")
    ids = np.arange(1, 30) * 7 % cfg["vocab_size"]

    def holds(off):
        assert off.head and off.skipped == [] and {M.dtype for M in off.matrices.values()} == {dtype}
    _as_on_the_cpu(model, ids, device[1], holds)


def _as_on_the_cpu(model, ids, kernels, holds) -> None:
    """The model's logits with the offload against the CPU path's (a prefill, then one-token steps): within
    FLIP_TOL of the active path's as the kernels run, bit for bit the scalar path's with one work-item per output;
    holds(offload) asserts what the device holds."""
    from petit import native
    from petit.gpu import attach, detach
    cpu, _ = _steps(model, ids)
    holds(attach(model))
    gpu, _ = _steps(model, ids)
    detach(model)
    err = np.abs(gpu - cpu).max(axis=1) / (cpu.max(axis=1) - cpu.min(axis=1))
    assert err.max() <= FLIP_TOL, f"position {err.argmax()}: {err.max():.2e} of the range"
    native.configure(isa="scalar")
    try:
        cpu, _ = _steps(model, ids)
        attach(model)
        kernels.group = 1
        gpu, _ = _steps(model, ids)
    finally:
        kernels.group = GROUP
        native.configure()
        detach(model)
    np.testing.assert_array_equal(gpu, cpu)


# ---- logits ----
def _cases() -> list:
    """(folder, weights): every dense fixture at q8_0 and q4_0, each model_type of the other kinds at q8_0 and those
    of Q4_0_OTHERS at q4_0 too."""
    import json
    out = [(p, w) for p in _folders(DENSE_DIRS) for w in ("q8_0", "q4_0")]
    for p in _other_folders():
        out.append((p, "q8_0"))
        if json.loads((p / "config.json").read_text())["model_type"] in Q4_0_OTHERS:
            out.append((p, "q4_0"))
    return out


CASES = _cases()
IDS = [f"{p.parent.name}/{p.name}-{w}" for p, w in CASES]


@pytest.mark.parametrize("folder, weights", CASES, ids=IDS)
def test_logits_with_the_offload_equal_the_cpu_path(device, folder, weights):
    """The kernels as they run (32 work-items per output) against the active CPU path: the same integers, the float
    sums in another order. A sum one ulp apart can round an activation of the next layer to the neighbouring int8
    code, which moves the logits by up to about 1 % of their range (a few cases of each kind do); the rest agree to
    about 1e-7. The bound: 0.03 of the range, well inside q8_0's 0.08 against float32.

    Where the model routes (experts, an indexer's positions or key blocks: tests/test_moe.py's rule), such a
    last-bit difference could also tip a near-tie to other experts, and a position that routes otherwise reaches
    every later one through attention or a recurrent state: the bound holds at the positions before the first that
    routes otherwise, and at least ROUTED of the positions must route as on the CPU (all of them do on every
    fixture here)."""
    from petit.gpu import attach, detach
    model = _load(folder, weights)
    ids = np.load(folder / "reference.npz")["input_ids"]
    cpu, cpu_routes = _steps(model, ids)
    for layers in _rounds(model):                          # all (and the LM head), then half (the head on the CPU)
        off = attach(model, layers=layers)
        assert off.n_layers == (off.n_total if layers is None else layers) and off.matrices
        assert off.head == (layers is None) or model.net.lm_head.dtype not in ("q8_0", "q4_0")
        gpu, gpu_routes = _steps(model, ids)
        detach(model)
        same = np.ones(len(ids), bool)
        for a, b in zip(cpu_routes, gpu_routes):
            same &= (a == b).reshape(len(ids), -1).all(axis=1)
        so_far = np.logical_and.accumulate(same)
        err = np.abs(gpu - cpu).max(axis=1) / (cpu.max(axis=1) - cpu.min(axis=1))
        assert same.mean() >= ROUTED, f"layers {layers}: the routing departs at positions {np.flatnonzero(~same)}"
        worst = err[so_far].max() if so_far.any() else 0.0
        assert worst <= FLIP_TOL, f"layers {layers}: position {err.argmax()}: {err.max():.2e} of the range"


@pytest.fixture
def scalar_path():
    """The CPU's scalar path for the test, then the default again."""
    from petit import native
    native.configure(isa="scalar")
    yield
    native.configure()


@pytest.mark.parametrize("folder, weights", CASES, ids=IDS)
def test_one_work_item_per_output_gives_the_scalar_paths_logits_bit_for_bit(device, scalar_path, folder, weights):
    """With one work-item per output the kernels add in the scalar path's order: a model's logits are then the
    scalar CPU path's bit for bit, prefill and decode, every layer on the device or half of them, whatever the CPU
    runs between the products (routed experts, mixers, latent attention's heads: the same bits in, the same out)."""
    from petit.gpu import attach, detach
    model = _load(folder, weights, repack=False)
    ids = np.load(folder / "reference.npz")["input_ids"]
    cpu, _ = _steps(model, ids)
    _, kernels = device
    for layers in _rounds(model):
        attach(model, layers=layers)
        kernels.group = 1
        try:
            gpu, _ = _steps(model, ids)
        finally:
            kernels.group = GROUP
            detach(model)
        np.testing.assert_array_equal(gpu, cpu, err_msg=f"layers {layers}")


def _rounds(model) -> list:
    """The --gpu-layers a fixture runs with: all, then half. Where no product of the first half of the layers is
    q8_0 / q4_0 (BitNet's ternary matrices; a recurrent or hybrid model whose mixers hold every matrix of those
    layers) the device would take nothing, so half of them is refused, saying why."""
    from petit.gpu import GpuUnavailable, attach
    from petit.models.blocks.plan import address
    from petit.native import ffi, lib
    plan, half = model.net.step_plan(), max(1, len(model.net.layers) // 2)
    kinds = {plan.weights[address(op.W[m])].dtype for op in (plan.ops[i] for i in range(plan.n_ops))
             if op.kind == lib.PT_OP_MATMUL and op.layer < half for m in range(3) if op.W[m] != ffi.NULL}
    if kinds & {"q8_0", "q4_0"}:
        return [None, half]
    with pytest.raises(GpuUnavailable, match="no matrix of this model can go to the device"):
        attach(model, layers=half)
    return [None]


def _steps(model, ids, n: int = 4) -> tuple[np.ndarray, list]:
    """The logits of every position of `ids` (a prefill of all but the last n tokens, then one token a step), and
    each routing layer's choices at every position (models.routing_choices)."""
    cache = model.new_cache(len(ids) + 1)
    rows, routes = [], []
    for a, b in [(0, len(ids) - n)] + [(i, i + 1) for i in range(len(ids) - n, len(ids))]:
        rows.append(model.forward(ids[a:b], cache, all_logits=True))
        routes.append(routing_choices(model, b - a))
    return np.concatenate(rows), [np.concatenate(r) for r in zip(*routes)]


def test_a_batch_of_sequences_runs_through_the_offload(device):
    from petit.gpu import attach
    model = _load(FIX / "hf" / "llama", "q8_0")
    a, b = [1, 5, 9, 2], [3, 4]
    cpu = model.forward_batch([(a, model.new_cache(8)), (b, model.new_cache(8))], all_logits=True)
    attach(model)
    gpu = model.forward_batch([(a, model.new_cache(8)), (b, model.new_cache(8))], all_logits=True)
    for c, g in zip(cpu, gpu):
        assert np.abs(g - c).max() <= TOL * (c.max() - c.min())


def test_a_matrix_swapped_after_attach_runs_on_the_cpu(device):
    """The records are matched to device copies by the address of their matrix: a matrix swapped in afterwards
    (replace_matrices) runs on the CPU with its own values, never as the stale copy."""
    from petit.gpu import attach, detach
    model = _load(FIX / "hf" / "llama", "q8_0")
    ids = np.load(FIX / "hf" / "llama" / "reference.npz")["input_ids"]
    before = model.logits(ids)
    attach(model)
    old = model.net.layers[0].down
    model.net.replace_matrices({id(old): Weight.from_float(old.dequantize() * 0.5, "q8_0")})
    got = model.logits(ids)
    detach(model)
    want = model.logits(ids)
    assert np.abs(got - want).max() <= TOL * (want.max() - want.min())
    assert np.abs(got - before).max() > 100 * TOL * (want.max() - want.min())


def test_as_many_layers_as_fit_and_a_matrix_over_the_largest_buffer_stays_on_the_cpu(device):
    """The default --gpu-layers: the layers whose matrices fit in 80 % of the device's memory, in order; a matrix
    larger than the device's largest buffer stays on the CPU (with the products that share its input)."""
    import dataclasses

    from petit.gpu import GpuUnavailable
    from petit.gpu.offload import MEMORY_SHARE, Offload
    from petit.models.blocks.plan import address
    dev, kernels = device
    model = _load(FIX / "hf" / "llama", "q8_0")
    ids = np.load(FIX / "hf" / "llama" / "reference.npz")["input_ids"]
    want = model.logits(ids)
    L0 = model.net.layers[0]
    layer = sum(getattr(L0, n).raw.nbytes for n in ("q", "k", "v", "o", "gate", "up", "down"))
    small = dataclasses.replace(dev, global_mem=int((layer + layer // 2) / MEMORY_SHARE))
    off = Offload(model.net, small, kernels)
    assert off.n_layers == 1 and not off.head
    assert any("the device's memory holds 1 layer(s)" in s for s in off.skipped)
    narrow = dataclasses.replace(dev, max_alloc=L0.q.raw.nbytes)      # gate, up, down and the head too big for it
    off = Offload(model.net, narrow, kernels)
    assert off.n_layers == model.n_layers and not off.head
    assert all(address(W.c) in off.matrices for W in (L0.q, L0.k, L0.v, L0.o))
    assert not any(address(W.c) in off.matrices for W in (L0.gate, L0.up, L0.down))
    assert off.skipped[0] == "6 matrices of layers 0..1: over the device's largest buffer (4 KiB)"
    model.net.offload = off
    got = model.logits(ids)
    model.net.offload = None
    assert np.abs(got - want).max() <= FLIP_TOL * (want.max() - want.min())
    narrower = dataclasses.replace(dev, max_alloc=L0.q.raw.nbytes - 1)  # q, o too; k and v fit, but share q's input
    with pytest.raises(GpuUnavailable, match=r"6 matrices of layers 0..1: over the device's largest buffer \(4 KiB\) "
                                             r"\(and the products sharing its input\)"):
        Offload(model.net, narrower, kernels)


# ---- refusals ----
def test_a_model_without_q8_0_or_q4_0_matrices_is_refused(device):
    from petit.gpu import GpuUnavailable, attach
    model = _load(FIX / "hf" / "llama", "f32")
    with pytest.raises(GpuUnavailable, match=f"its kernels take {KERNEL_TYPES}: load with --weights q8_0, q4_0 or "
                                             "a K-quant"):
        attach(model)
    assert model.net.offload is None


def test_a_device_that_is_not_there_is_named(device):
    from petit.gpu import GpuUnavailable, attach
    model = _load(FIX / "hf" / "llama", "q8_0")
    with pytest.raises(GpuUnavailable, match="no OpenCL device 7 on platform 9"):
        attach(model, platform=9, device=7)


def test_a_moe_model_offloads_its_products_and_says_what_stays_on_the_cpu(device):
    """The products of attention and the dense layers go to the device; the routed experts' matrices stay with their
    op on the CPU, and the offload says so (petit run prints these lines)."""
    from petit.gpu import attach
    from petit.models.blocks.plan import address
    model = _load(FIX / "hf_moe" / "qwen2_moe", "q8_0")
    off = attach(model)
    L1 = model.net.layers[1]                    # its layers 0 and 2 are dense
    assert all(address(W.c) in off.matrices for W in (L1.q, L1.k, L1.v, L1.o)) and off.head
    assert not any(address(W.c) in off.matrices for W in L1.moe.matrices())
    assert off.skipped == ["27 matrices multiplied inside routed experts (64 KiB): those ops run on the CPU"]
    assert attach(_load(FIX / "hf" / "llama", "q8_0")).skipped == []          # a dense model multiplies nothing else


def test_a_product_whose_matrix_the_kernels_do_not_take_stays_on_the_cpu_named(device):
    """ZAYA's layers keep a float32 product beside the q8_0 ones; Qwen4-Exp an f16 one after its last layer."""
    from petit.gpu import attach
    off = attach(_load(FIX / "hf5_fam36g" / "zaya", "q8_0"))
    assert off.skipped[0] == f"12 matrices of layers 0..2: f32 (the device kernels take {KERNEL_TYPES})"
    assert off.skipped[-1] == "36 matrices multiplied inside CCA, routed experts (76 KiB): those ops run on the CPU"
    off = attach(_load(FIX / "hf5_q4exp" / "qwen4_exp_text", "q8_0"))
    assert f"1 matrices after the last layer: f16 (the device kernels take {KERNEL_TYPES})" in off.skipped


def test_a_net_that_is_not_the_decoder_is_refused():
    from petit.gpu import GpuUnavailable, attach
    with pytest.raises(GpuUnavailable, match="does not run the decoder's plan"):
        attach(type("M", (), {"net": object()})())


def test_zero_layers_leaves_only_the_cpu(device):
    from petit.gpu import GpuUnavailable, attach
    with pytest.raises(GpuUnavailable, match="--gpu-layers 0"):
        attach(_load(FIX / "hf" / "llama", "q8_0"), layers=0)


def test_the_device_chosen_and_why_the_others_are_not():
    from petit.gpu import Device, GpuUnavailable, choose, why_not

    def dev(p, i, kind):
        return Device(p, i, f"platform{p}", f"{kind.lower()}{i}", kind, 1 << 30, 1 << 28, "OpenCL 3.0")
    cpu, igpu, dgpu = dev(0, 0, "CPU"), dev(1, 0, "GPU"), dev(1, 1, "GPU")
    assert choose([cpu, igpu, dgpu]) is igpu                   # the first GPU, wherever the CPU device is listed
    assert why_not(igpu, cpu) == "not a GPU" and why_not(igpu, dgpu) == "a GPU listed before it comes first"
    assert choose([cpu]) is cpu and "no GPU here" in why_not(cpu, dev(0, 1, "ACCELERATOR"))
    assert choose([cpu, igpu, dgpu], platform=1, device=1) is dgpu
    assert choose([cpu, igpu, dgpu], device=0) is cpu          # platform 0 when only the device is given
    with pytest.raises(GpuUnavailable, match=r"no OpenCL device 2 on platform 1 \(platform/device here: 0/0, 1/0, 1/1"):
        choose([cpu, igpu, dgpu], platform=1, device=2)
    with pytest.raises(GpuUnavailable, match="no OpenCL platform or device found"):
        choose([])


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
    assert "[--gpu uses this one]" in out


def test_info_without_pyopencl_says_how_to_get_it(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "pyopencl", None)       # import pyopencl raises ImportError
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "opencl:         none (pyopencl is not installed" in out and 'pip install "petit[gpu]"' in out


def test_serve_runs_its_steps_through_the_offload(device):
    """`petit serve --gpu` attaches the offload in the worker's prepare hook: completions (a batch of steps on the
    worker thread) come back as the CPU's."""
    import httpx

    from petit.gpu import attach
    from petit.server import Server
    from petit.server.engine import ServerWorker
    body = {"model": "m", "prompt": "hello there", "temperature": 0, "max_tokens": 5}
    texts, offloads = [], []
    for prepare in (None, lambda m: offloads.append(attach(m))):
        server = Server(ServerWorker(str(FIX / "hf" / "llama"), weights="q8_0", max_tokens=8, prepare=prepare),
                        port=0).start()
        try:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                r = c.post("/completions", json=body)
                assert r.status_code == 200, r.text
                texts.append(r.json()["choices"][0]["text"])
        finally:
            server.stop()
    assert len(offloads) == 1 and offloads[0].n_layers == offloads[0].n_total
    assert texts[0] == texts[1]


def test_chat_with_gpu_answers_as_on_the_cpu(device):
    """`petit chat --gpu` on the bundled model: the same replies as tests/test_cli.py's, the device named on stderr."""
    import subprocess
    import sys
    asset = str(Path(__file__).parent.parent / "assets" / "default-q8_0.petit")
    r = subprocess.run([sys.executable, "-m", "petit.cli", "chat", "-m", asset, "--gpu"],
                       input="what is 12 plus 7?\nwhich is bigger, 2 or 16?\n", capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "19\n16\n"
    assert "petit chat: gpu: " in r.stderr and "layers' matrices and the LM head" in r.stderr


def test_a_device_error_in_a_step_is_named_and_the_cache_stays(device, monkeypatch):
    from petit.gpu import attach
    model = _load(FIX / "hf" / "llama", "q8_0")
    off = attach(model)
    cache = model.new_cache(16)
    model.forward([1, 2, 3], cache)
    cl = off.kernels.cl

    def lost(*a, **k):
        raise cl.MemoryError("clEnqueueNDRangeKernel", cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE, "out of memory")
    monkeypatch.setattr(off.kernels, "launch", lost)
    with pytest.raises(RuntimeError, match="the OpenCL device failed in layer 0's product .*--cpu runs without it"):
        model.forward([4], cache)
    assert cache.pos == 3
