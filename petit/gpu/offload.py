"""The forward step's matmuls on an OpenCL device (issue 34).

The decoder's step stays kernels/plan.c's plan. With an `Offload` attached (`attach`), the plan runs in pieces:
the ops between two offloaded products run on the CPU through pt_plan_run over that slice of the records (the same
C, the same drivers; routed experts, state-space mixers and latent attention's per-head products among them), and
each offloaded MATMUL record (q|k|v, o, gate|up, down, latent attention's projections, an indexer's...: the
matrices of the layers on the device the kernels take) and the LM head run on the device, their input quantized
once on the host and sent across, their output read back into the scratch buffer the plan's next op reads. Only
the step's activations cross; the matrices were uploaded once, in their stored blocks. docs/gpu.md says why this
design and what is left.
"""
import numpy as np

from petit.gpu.devices import Device, GpuUnavailable, choose, list_devices, opencl
from petit.gpu.kernels import KQUANT_BYTES, TYPES, Kernels, self_check
from petit.models.blocks.decoder import Decoder
from petit.models.blocks.plan import address
from petit.native import ffi, lib

_TYPES = " / ".join(TYPES)      # the matrix types the kernels take
MEMORY_SHARE = 0.8      # of the device's global memory the matrices may take (the rest: scratch, the driver)
# what multiplies by matrices inside an op the offload leaves on the CPU (docs/gpu.md): the words a user reads
INNER = {lib.PT_OP_MOE: "routed experts", lib.PT_OP_MAMBA: "state-space / recurrent mixers",
         lib.PT_OP_HEADS: "per-head products", lib.PT_OP_CCA: "CCA"}


class _DeviceMatrix:
    """A matrix on the device. It holds its host Weight: while the Offload lives, no other pt_tensor can take the
    address the plan's records are matched by (a matrix swapped out afterwards runs on the CPU, never as a stale
    copy). Attach after any change to the weights."""

    def __init__(self, W, buf):
        self.W, self.dtype, self.buf = W, W.dtype, buf
        self.kq = W.dtype in KQUANT_BYTES       # its activations quantized as for the K-quants
        self.rows, self.cols, self.nbytes = W.shape[0], W.shape[1], W.raw.nbytes


def _products(plan, n_layers: int) -> tuple[list[list[list]], list[list], object]:
    """The plan's products by layer: (per layer, the matrices of each of its MATMUL records; those after the last
    layer (a head transform); the LM head's matrix). The records before the first layer go with layer 0."""
    layers: list[list[list]] = [[] for _ in range(n_layers)]
    after, head = [], None
    for i in range(plan.n_ops):
        op = plan.ops[i]
        if op.kind == lib.PT_OP_LOGITS:
            head = plan.weights[address(op.W[0])]
        elif op.kind == lib.PT_OP_MATMUL:
            Ws = [plan.weights[address(op.W[m])] for m in range(3) if op.W[m] != ffi.NULL]
            (after if op.layer >= n_layers else layers[max(op.layer, 0)]).append(Ws)
    return layers, after, head


class Offload:
    """The matrices of a decoder's first `n_layers` layers' products (and its LM head when every layer is there)
    on a device, and the step runner the decoder calls (`run`). Every product of the plan (a MATMUL record) whose
    matrices the kernels take goes there, whatever the family; the ops between them, routed experts and mixers
    included, run on the CPU as they are. `skipped` says what stays on the CPU and why."""

    def __init__(self, net: Decoder, device: Device, kernels: Kernels, layers: int | None = None):
        self.device, self.kernels = device, kernels
        self.matrices: dict[int, _DeviceMatrix] = {}
        self.skipped: list[str] = []
        self.n_layers = 0
        self.n_total = len(net.layers)
        plan = net.step_plan()
        per_layer, after, head = _products(plan, self.n_total)
        want = self.n_total if layers is None else min(layers, self.n_total)
        budget, used = int(device.global_mem * MEMORY_SHARE), 0
        kept: dict[str, list[int]] = {}      # why a matrix stays on the CPU -> the layers of those matrices
        for i in range(want):
            new = self._chosen(per_layer[i], kept, i)
            size = sum(W.raw.nbytes for W in new)
            if used + size > budget:
                self.skipped.append(f"{_layers(i, self.n_total - 1)}: the device's memory holds {i} layer(s) "
                                    f"({_size(used)} of the {_size(budget)} the matrices may take)")
                break
            for W in new:
                self._upload(W)
            used += size
            self.n_layers = i + 1
        for why, where in kept.items():
            self.skipped.insert(0, f"{len(where)} matrices of {_layers(where[0], where[-1])}: {why}")
        if self.n_layers < self.n_total and self.n_layers == want:
            self.skipped.append(f"{_layers(self.n_layers, self.n_total - 1)}: --gpu-layers {want}")
        self.head = False
        if self.n_layers == self.n_total:          # a head transform after the last layer, and the LM head
            outside: dict[str, list[int]] = {}
            tail = self._chosen(after, outside, self.n_total) + self._chosen([[head]], {}, self.n_total)
            if used + sum(W.raw.nbytes for W in tail) <= budget:
                for W in tail:
                    self._upload(W)
                self.head = address(head.c) in self.matrices
            self.skipped += [f"{len(where)} matrices after the last layer: {why}" for why, where in outside.items()]
        if not self.head:
            self.skipped.append("the LM head: " + (self._why(head) if not self._fits(head) else
                                                   "not every layer is on the device" if self.n_layers < self.n_total
                                                   else "no room left on the device"))
        inner = self._inner(net, plan)
        if inner:
            self.skipped.append(inner)
        if not self.matrices:
            raise GpuUnavailable(f"no matrix of this model can go to the device (its kernels take {_TYPES}: "
                                 "load with --weights q8_0, q4_0 or a K-quant): " + "; ".join(self.skipped))
        self._plan, self._segments = None, []

    def _chosen(self, records: list[list], kept: dict, layer: int) -> list:
        """The matrices of `records` not on the device yet whose products can go there (every matrix of a record
        fits: they share one input); the others' reasons into kept."""
        out = {}
        for Ws in records:
            bad = [W for W in Ws if not self._fits(W)]
            if bad:
                why = self._why(bad[0]) + (" (and the products sharing its input)" if len(bad) < len(Ws) else "")
                kept.setdefault(why, []).extend([layer] * len(Ws))
                continue
            out.update((address(W.c), W) for W in Ws if address(W.c) not in self.matrices)
        return list(out.values())

    def _inner(self, net: Decoder, plan) -> str:
        """What the step multiplies inside the ops left on the CPU (routed experts, mixers...), said in a line;
        "" when it multiplies nothing there."""
        inside = [W for W in net.matrices() if address(W.c) not in plan.weights]
        if not inside:
            return ""
        kinds = sorted({INNER[plan.ops[i].kind] for i in range(plan.n_ops) if plan.ops[i].kind in INNER})
        what = ", ".join(kinds) if kinds else "the step's other ops"
        return (f"{len(inside)} matrices multiplied inside {what} "
                f"({_size(sum(W.raw.nbytes for W in inside))}): those ops run on the CPU")

    def _fits(self, W) -> bool:
        return W.dtype in TYPES and W.raw.nbytes <= self.device.max_alloc

    def _why(self, W) -> str:
        if W.dtype not in TYPES:
            return f"{W.dtype} (the device kernels take {_TYPES})"
        return f"over the device's largest buffer ({_size(self.device.max_alloc)})"

    def _upload(self, W) -> None:
        key = address(W.c)
        if key not in self.matrices:
            self.matrices[key] = _DeviceMatrix(W, self.kernels.upload(W.stored()))

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes for m in self.matrices.values())

    def describe(self) -> str:
        head = "and the LM head " if self.head else ""
        return (f"{self.n_layers} of {self.n_total} layers' matrices {head}({_size(self.nbytes)}) on "
                f"{self.device.describe()}")

    # ---- running ----
    def _offloaded(self, op) -> bool:
        if op.kind == lib.PT_OP_MATMUL:
            Ws = [op.W[m] for m in range(3) if op.W[m] != ffi.NULL]
            return all(address(W) in self.matrices for W in Ws)
        return op.kind == lib.PT_OP_LOGITS and address(op.W[0]) in self.matrices

    def segments(self, plan) -> list[tuple[bool, int, int]]:
        """The plan cut into (on the device?, first op, end op): runs of CPU ops and single device products."""
        if self._plan is not plan:
            segs, start = [], 0
            for i in range(plan.n_ops):
                if self._offloaded(plan.ops[i]):
                    if start < i:
                        segs.append((False, start, i))
                    segs.append((True, i, i + 1))
                    start = i + 1
            if start < plan.n_ops:
                segs.append((False, start, plan.n_ops))
            self._plan, self._segments = plan, segs
        return self._segments

    def run(self, plan, step) -> int:
        """One step of `plan` over `step` (as pt_plan_run: 0, or the failing op's error with step.failed_op set)."""
        T = sum(step.seqs[i].T for i in range(step.n_seqs))
        n_logits = sum(step.seqs[i].n_logits for i in range(step.n_seqs))
        for on_device, i, j in self.segments(plan):
            if not on_device:
                rc = lib.pt_plan_run(plan.ops + i, j - i, step)
                if rc:
                    if step.failed_op >= 0:
                        step.failed_op += i
                    return rc
                continue
            op = plan.ops[i]
            try:
                with self.kernels.lock:
                    if op.kind == lib.PT_OP_LOGITS:
                        if n_logits:
                            self._logits(op, n_logits, step.logits)
                    else:
                        self._matmul(op, T)
            except self.kernels.cl.Error as e:     # out of device memory, a lost device: the step fails, named
                where = "the LM head" if op.kind == lib.PT_OP_LOGITS else f"layer {op.layer}"
                raise RuntimeError(f"the OpenCL device failed in {where}'s product ({self.device.name}): {e}; "
                                   "--cpu runs without it") from e
        return 0

    def _matmul(self, op, T: int) -> None:
        """Up to three products of one input: queued together, read back together (the last read waits)."""
        k = self.kernels
        n = 3 if op.W[2] != ffi.NULL else 2 if op.W[1] != ffi.NULL else 1
        mats = [self.matrices[address(op.W[m])] for m in range(n)]
        x, acts = _view(op.x, T, mats[0].cols), {}     # the input quantized once for each format the matrices take
        for M in mats:
            if M.kq not in acts:
                acts[M.kq] = k.put_act(x, M.kq)
        bufs = [k.launch(M.dtype, M.buf, M.rows, acts[M.kq], slot=m) for m, M in enumerate(mats)]
        outs = [_view(op.y[m], T, M.rows) for m, M in enumerate(mats)]
        if op.mode:                         # accumulate into y (the residual stream; one matrix only)
            tmp = np.empty_like(outs[0])
            k.read(bufs[0], tmp)
            outs[0] += tmp
            return
        for m in range(n):
            k.read(bufs[m], outs[m], blocking=m == n - 1)

    def _logits(self, op, n: int, logits) -> None:
        M = self.matrices[address(op.W[0])]
        out = _view(logits, n, M.rows)
        self.kernels.matmul(M.dtype, M.buf, M.rows, self.kernels.put_act(_view(op.x, n, M.cols), M.kq), out)
        if op.b != ffi.NULL:
            out += _view(op.b, 1, M.rows)
        if op.scale != 1.0:
            out *= np.float32(op.scale)
        if op.softcap > 0.0:
            lib.pt_softcap(ffi.cast("float *", logits), n * M.rows, op.softcap)    # the CPU's own tanhf


def _layers(first: int, last: int) -> str:
    return f"layer {first}" if first == last else f"layers {first}..{last}"


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def _view(ptr, rows: int, cols: int) -> np.ndarray:
    """rows x cols float32 values at a C pointer, as a writable array (no copy)."""
    return np.frombuffer(ffi.buffer(ffi.cast("float *", ptr), rows * cols * 4), np.float32).reshape(rows, cols)


_started: dict[tuple[int, int], tuple[Device, Kernels]] = {}


def start(platform: int | None = None, device: int | None = None) -> tuple[Device, Kernels]:
    """The chosen device with its kernels built and checked, once per process (every model offloaded to it shares
    its context, queue and program); GpuUnavailable saying why it cannot be used."""
    cl = opencl()
    dev = choose(list_devices(), platform, device)
    if (dev.platform, dev.index) in _started:
        return _started[dev.platform, dev.index]
    try:
        kernels = Kernels(cl, cl.Context([dev.handle]), dev.handle)
    except Exception as e:             # a driver that cannot build the program
        raise GpuUnavailable(f"{dev.describe()}: the kernels do not build: {type(e).__name__}: {e}") from None
    why = self_check(kernels)
    if why:
        raise GpuUnavailable(f"{dev.describe()}: start-up check failed, not used: {why}")
    _started[dev.platform, dev.index] = dev, kernels
    return dev, kernels


def attach(model, platform: int | None = None, device: int | None = None, layers: int | None = None) -> Offload:
    """Put `model`'s matmuls on an OpenCL device (the first `layers` layers' matrices, default as many as fit):
    its forward steps then run them there. GpuUnavailable (the model keeps running on the CPU) when no device
    passes the start-up check or the model has nothing the device runs."""
    net = model.net
    if not isinstance(net, Decoder):
        raise GpuUnavailable(f"this model's family ({type(net).__name__}) does not run the decoder's plan; the "
                             "offload covers the decoder families (their steps' products)")
    if layers is not None and layers < 0:
        raise ValueError(f"layers must be at least 0, got {layers}")
    dev, kernels = start(platform, device)
    off = Offload(net, dev, kernels, layers)
    net.offload = off
    return off


def detach(model) -> None:
    """Back to the CPU alone (the device's buffers go with the Offload)."""
    model.net.offload = None
