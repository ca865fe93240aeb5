"""Tests for reading Hugging Face checkpoints without torch (petit/formats/: checkpoint.py, safetensors.py,
torch_bin.py).

safetensors files are written by hand here; the pytorch_model.bin fixtures in tests/fixtures/torch_bin/ were made
by torch (make_fixtures.py there); malicious and hand-made torch pickles are assembled opcode by opcode.
"""

import json
import mmap
import os
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from petit.formats.checkpoint import CheckpointError, open_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "torch_bin"
ALL_DTYPES = {  # Petit dtype -> (safetensors dtype, sample array)
    "f32": ("F32", np.array([[1.5, -2.0, 3.25], [0.0, 1e-30, -7.0]], np.float32)),
    "f16": ("F16", np.array([1.0, -0.5, 65504.0, 6e-8], np.float16)),
    "bf16": ("BF16", np.array([[0x3F80, 0xC020], [0x7F80, 0x0001]], np.uint16)),
    "f64": ("F64", np.array([np.pi, -1e30, 1e-300], np.float64)),
    "i64": ("I64", np.array([-(2**63), 2**63 - 1, 5], np.int64)),
    "i32": ("I32", np.array([[-(2**31)], [2**31 - 1]], np.int32)),
    "i16": ("I16", np.array([-32768, 32767], np.int16)),
    "i8": ("I8", np.array([-128, 127, 0], np.int8)),
    "u8": ("U8", np.arange(250, 256, dtype=np.uint8).reshape(2, 1, 3)),
    "bool": ("BOOL", np.array([True, False, True])),
}


# --- helpers: safetensors by hand ---------------------------------------------------------------------------------

def st_header(tensors: dict, metadata=None):
    """(header dict, data bytes) for tensors {name: (safetensors dtype, array)}, packed in order."""
    header, blobs, pos = {}, [], 0
    for name, (st_dtype, a) in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": st_dtype, "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    if metadata is not None:
        header["__metadata__"] = metadata
    return header, b"".join(blobs)


def write_st(path, header, data=b""):
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(h)) + h + data)


def write_index(path, weight_map):
    Path(path).write_text(json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))


def message(folder) -> str:
    with pytest.raises(CheckpointError) as e:
        open_checkpoint(folder)
    return str(e.value)


def mmap_backed(a: np.ndarray) -> bool:
    """True if `a` is a view into a memory map (zero-copy)."""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a.obj if isinstance(a, memoryview) else a, mmap.mmap)


# --- helpers: torch pickles by hand (protocol 2 opcodes) ----------------------------------------------------------

def p_str(s):
    return b"X" + struct.pack("<I", len(s.encode())) + s.encode()


def p_int(i):
    return b"J" + struct.pack("<i", i)


def p_tuple(*items):
    return b"(" + b"".join(items) + b"t"


def p_global(module, name):
    return b"c" + f"{module}\n{name}\n".encode()


def p_call(fn, *args):
    return fn + p_tuple(*args) + b"R"


def p_tensor(storage_type, key, numel, offset, size, stride):
    pid = p_tuple(p_str("storage"), p_global("torch", storage_type), p_str(key), p_str("cpu"), p_int(numel)) + b"Q"
    return p_call(p_global("torch._utils", "_rebuild_tensor_v2"), pid, p_int(offset), p_tuple(*map(p_int, size)),
                  p_tuple(*map(p_int, stride)), b"\x89", p_call(p_global("collections", "OrderedDict")))


def p_state_dict(items: dict) -> bytes:
    return b"\x80\x02}(" + b"".join(p_str(k) + v for k, v in items.items()) + b"u."


def write_torch_zip(path, pkl, storages=None, byteorder="little", compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", byteorder)
        for key, data in (storages or {}).items():
            z.writestr(f"archive/data/{key}", data)
        z.writestr("archive/version", "3\n")


def without_expanded(src, dst):
    """Copy the torch-made `src` to `dst` minus its stride-0 'expanded' tensor (which Petit refuses): the pickle's
    entry for it is cut out, from its key up to the next key; nothing after it refers to the memo slots it filled."""
    with zipfile.ZipFile(src) as z:
        members = {info.filename: z.read(info) for info in z.infolist()}
    pkl = members["state_dict/data.pkl"]
    start, end = pkl.index(p_str("expanded")), pkl.index(p_str("scalar"))
    assert pkl.count(p_str("expanded")) == 1 and start < end
    members["state_dict/data.pkl"] = pkl[:start] + pkl[end:]
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)


# --- safetensors ----------------------------------------------------------------------------------------------------

def test_safetensors_round_trip_of_every_dtype(tmp_path):
    tensors = {f"t.{d}": spec for d, spec in ALL_DTYPES.items()}
    tensors["scalar"], tensors["empty"] = ("F32", np.array(4.5, np.float32)), ("F16", np.zeros((0, 3), np.float16))
    write_st(tmp_path / "model.safetensors", *st_header(tensors, {"format": "pt"}))
    with open_checkpoint(tmp_path) as ck:
        assert ck.files == [str(tmp_path / "model.safetensors")] and ck.format == "safetensors"
        assert ck.names() == sorted(tensors) and "t.f32" in ck and "nope" not in ck
        for name, (_, a) in tensors.items():
            dtype = name[2:] if name.startswith("t.") else {"scalar": "f32", "empty": "f16"}[name]
            assert ck.info(name) == (dtype, a.shape)
            raw = ck.raw(name)
            assert raw.dtype == a.dtype and raw.shape == a.shape and np.array_equal(raw, a)
            assert not raw.flags.writeable and mmap_backed(raw)  # zero-copy
            f = ck.f32(name)
            assert f.dtype == np.float32 and f.flags.writeable and f.shape == a.shape
            if dtype != "bf16":
                assert np.array_equal(f, a.astype(np.float32))
        assert ck.f32("t.bf16").tolist() == [[1.0, -2.5], [np.inf, np.float32(2.0**-133)]]


def test_bf16_to_f32_is_exact_for_every_bit_pattern(tmp_path):
    bits = np.arange(2**16, dtype=np.uint16)
    write_st(tmp_path / "model.safetensors", *st_header({"b": ("BF16", bits)}))
    with open_checkpoint(tmp_path) as ck:
        f = ck.f32("b")
    assert np.array_equal(f.view(np.uint32), bits.astype(np.uint32) << 16)  # NaN payloads and signs included


def test_sharded_safetensors(tmp_path):
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([7, 8], np.uint16)
    write_st(tmp_path / "model-00001-of-00002.safetensors", *st_header({"a": ("F32", a), "extra": ("F32", a)}))
    write_st(tmp_path / "model-00002-of-00002.safetensors", *st_header({"b": ("BF16", b)}))
    write_index(tmp_path / "model.safetensors.index.json",
                {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})
    write_st(tmp_path / "model.safetensors", *st_header({"ignored": ("F32", a)}))  # the index takes precedence
    with open_checkpoint(tmp_path) as ck:
        assert ck.names() == ["a", "b"]  # the index is authoritative: "extra" is not listed
        assert ck.files == [str(tmp_path / f"model-0000{i}-of-00002.safetensors") for i in (1, 2)]
        assert np.array_equal(ck.raw("a"), a) and ck.info("b") == ("bf16", (2,))


def test_precedence_and_missing_files(tmp_path):
    without_expanded(FIXTURES / "state_dict.bin", tmp_path / "pytorch_model.bin")
    with open_checkpoint(tmp_path) as ck:
        assert ck.format == "pytorch_bin"
    write_st(tmp_path / "model.safetensors", *st_header({"w": ("F32", np.ones(2, np.float32))}))
    with open_checkpoint(tmp_path) as ck:
        assert ck.format == "safetensors" and ck.names() == ["w"]
        with pytest.raises(CheckpointError) as e:
            ck.info("x")
        assert str(e.value) == f"tensor 'x' is missing from {tmp_path}"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert message(empty) == (f"{empty}: no checkpoint found (looked for model.safetensors.index.json, "
                              f"model.safetensors, pytorch_model.bin.index.json, pytorch_model.bin)")
    assert message(tmp_path / "absent") == f"{tmp_path / 'absent'}: folder not found"


BASE = {"w": ("F32", np.arange(4, dtype=np.float32)), "v": ("F32", np.arange(2, dtype=np.float32))}


def _patched(**v_fields):
    header, data = st_header(BASE)
    header["v"].update(v_fields)
    return header, data


CORRUPT = {
    "truncated header": (b"\x10\x00\x00", "file is 3 bytes, shorter than the 8-byte header length (truncated or not a "
                                          "safetensors file)"),
    "header length past EOF": (struct.pack("<Q", 1000) + b"{}", "header length 1000 runs past the end of the file "
                                                                "(10 bytes; truncated or not a safetensors file)"),
    "bad JSON": ((b"{not json", b""), "header is not valid JSON (Expecting property name enclosed in double "
                                      "quotes: line 1 column 2 (char 1))"),
    "not an object": ((b"[1]", b""), "header must be a JSON object, found list"),
    "offsets out of range": (_patched(data_offsets=[16, 32]), "tensor 'v': data_offsets [16, 32] are out of range "
                                                              "of the 24-byte data buffer"),
    "overlapping": (_patched(data_offsets=[8, 16]), "tensor 'v': data_offsets [8, 16] overlap those of tensor 'w' "
                                                    "[0, 16]"),
    "wrong nbytes": (_patched(shape=[3]), "tensor 'v': data_offsets [16, 24] hold 8 bytes, but dtype F32 and shape "
                                          "(3,) need 12"),
    "unknown dtype": (_patched(dtype="F8_E4M3"), "tensor 'v': unsupported dtype 'F8_E4M3' (supported: F32, F16, "
                                                 "BF16, F64, I64, I32, I16, I8, U8, BOOL)"),
    "negative shape": (_patched(shape=[-2]), "tensor 'v': shape [-2] must be a list of non-negative integers"),
}


@pytest.mark.parametrize("case", CORRUPT)
def test_corrupt_safetensors_errors(tmp_path, case):
    content, expected = CORRUPT[case]
    path = tmp_path / "model.safetensors"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        write_st(path, *content)
    assert message(tmp_path) == f"{path}: {expected}"


def test_sharded_index_errors(tmp_path):
    write_st(tmp_path / "s1.safetensors", *st_header(BASE))
    index = tmp_path / "model.safetensors.index.json"
    write_index(index, {"w": "s1.safetensors", "b": "s2.safetensors", "c": "s2.safetensors"})
    assert message(tmp_path) == f"{index}: shard 's2.safetensors' (holding 'b' and 1 more) is missing from {tmp_path}"
    write_index(index, {"w": "s1.safetensors", "z": "s1.safetensors"})
    assert message(tmp_path) == (f"{tmp_path / 's1.safetensors'}: tensor 'z' is listed in model.safetensors.index.json "
                                 f"but missing from this shard")
    write_index(index, {"w": "../s1.safetensors"})
    assert message(tmp_path) == f"{index}: tensor 'w': shard '../s1.safetensors' is not a file name inside the folder"
    index.write_text('{"weight_map": [1]}')
    assert message(tmp_path) == (f"{index}: expected a JSON object with a 'weight_map' object of tensor name -> "
                                 f"shard file name")


def test_close_keeps_live_views_valid(tmp_path):
    write_st(tmp_path / "model.safetensors", *st_header(BASE))
    ck = open_checkpoint(tmp_path)
    view = ck.raw("w")
    ck.close()
    ck.close()  # idempotent, and no BufferError while `view` is alive
    assert view.tolist() == [0, 1, 2, 3]
    with pytest.raises(CheckpointError, match="the checkpoint is closed"):
        ck.raw("w")


# --- pytorch_model.bin ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def expected():
    with np.load(FIXTURES / "expected.npz") as z:
        return {k: z[k] for k in z.files}


TORCH_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
                "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool"}


def test_torch_bin_fixture_matches_torch(tmp_path, expected):
    without_expanded(FIXTURES / "state_dict.bin", tmp_path / "pytorch_model.bin")
    dtypes = dict(s.split("=torch.") for s in expected["__dtypes__"])
    with open_checkpoint(tmp_path) as ck:
        assert set(ck.names()) == set(dtypes) - {"lm_head", "norm", "expanded"}
        for name in ck.names():
            raw, want = ck.raw(name), expected[name]
            assert ck.info(name) == (TORCH_DTYPES[dtypes[name]], want.shape), name
            assert raw.dtype == want.dtype and np.array_equal(raw, want) and raw.flags.c_contiguous, name
            assert not raw.flags.writeable
            assert mmap_backed(raw) == (name != "transposed"), name  # copies only when transposed
        assert np.shares_memory(ck.raw("base"), ck.raw("offset_slice"))
        assert np.shares_memory(ck.raw("0.weight"), ck.raw("tied"))
        assert np.array_equal(ck.f32("bf16").view(np.uint32), expected["bf16"].astype(np.uint32) << 16)
        assert np.array_equal(ck.f32("f16"), expected["f16"].astype(np.float32))


def test_sharded_torch_bin_and_compressed_members(tmp_path, expected):
    without_expanded(FIXTURES / "state_dict.bin", tmp_path / "pytorch_model-00001-of-00002.bin")
    with zipfile.ZipFile(FIXTURES / "shard2.bin") as src, \
            zipfile.ZipFile(tmp_path / "pytorch_model-00002-of-00002.bin", "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    write_index(tmp_path / "pytorch_model.bin.index.json",
                {"base": "pytorch_model-00001-of-00002.bin", "lm_head": "pytorch_model-00002-of-00002.bin",
                 "norm": "pytorch_model-00002-of-00002.bin"})
    with open_checkpoint(tmp_path) as ck:
        assert ck.names() == ["base", "lm_head", "norm"] and len(ck.files) == 2
        for name in ck.names():
            assert np.array_equal(ck.raw(name), expected[name])
        assert not mmap_backed(ck.raw("lm_head"))  # a compressed member is copied


def test_stride_zero_tensor_is_refused_before_anything_is_allocated(tmp_path):
    # 4 bytes of storage in a file of a few hundred bytes, posing as a (100000, 100000) f32 tensor (37 GiB)
    path = tmp_path / "pytorch_model.bin"
    write_torch_zip(path, p_state_dict({"w": p_tensor("FloatStorage", "0", 1, 0, (100000, 100000), (0, 0))}),
                    {"0": bytes(4)})
    assert path.stat().st_size < 1000
    assert message(tmp_path) == (f"{path}: tensor 'w': stride (0, 0) for size (100000, 100000) is not a permutation "
                                 f"of contiguous strides (expanded, overlapping or gapped tensors are not supported)")
    shutil.copy(FIXTURES / "state_dict.bin", path)  # torch's own expand() is refused the same way
    assert message(tmp_path) == (f"{path}: tensor 'expanded': stride (0, 1) for size (3, 4) is not a permutation of "
                                 f"contiguous strides (expanded, overlapping or gapped tensors are not supported)")


def test_permuted_strides_load(tmp_path):
    storage = np.arange(30, dtype="<f4")
    pkl = p_state_dict({"perm": p_tensor("FloatStorage", "0", 30, 5, (2, 3, 4), (1, 8, 2)),  # offset 5, 24 elements
                        "row": p_tensor("LongStorage", "1", 4, 0, (1, 4), (0, 1)),  # a size-1 dim's stride is unused
                        "empty": p_tensor("FloatStorage", "0", 30, 0, (0, 7), (0, 0))})
    write_torch_zip(tmp_path / "pytorch_model.bin", pkl, {"0": storage.tobytes(),
                                                         "1": np.arange(4, dtype="<i8").tobytes()})
    with open_checkpoint(tmp_path) as ck:
        assert np.array_equal(ck.raw("perm"), storage[5:29].reshape(3, 4, 2).transpose(2, 0, 1))
        assert ck.raw("row").tolist() == [[0, 1, 2, 3]] and mmap_backed(ck.raw("row"))
        assert ck.raw("empty").shape == (0, 7)


def test_compressed_storage_past_the_end_of_the_file(tmp_path):
    # a deflated storage whose central directory claims 1 GiB (2**28 f32), compressed into more bytes than the file has
    path = tmp_path / "pytorch_model.bin"
    write_torch_zip(path, p_state_dict({"w": p_tensor("FloatStorage", "0", 1 << 28, 0, (1 << 28,), (1,))}),
                    {"0": bytes(4)}, compression=zipfile.ZIP_DEFLATED)
    data = bytearray(path.read_bytes())
    entry = data.index(b"archive/data/0", data.index(b"PK\x01\x02")) - 46  # its central directory header
    assert data[entry:entry + 4] == b"PK\x01\x02"
    struct.pack_into("<II", data, entry + 20, 1 << 20, 1 << 30)  # compressed size, uncompressed size
    path.write_bytes(bytes(data))
    assert message(tmp_path) == f"{path}: zip member 'archive/data/0' runs past the end of the file (truncated)"


def test_big_endian_storage(tmp_path):
    pkl = p_state_dict({"w": p_tensor("FloatStorage", "0", 3, 1, (2,), (1,)),
                        "b": p_tensor("BFloat16Storage", "1", 1, 0, (), ())})
    write_torch_zip(tmp_path / "pytorch_model.bin", pkl, {"0": np.array([9, 1.5, -2], ">f4").tobytes(),
                                                         "1": np.array([0x3F80], ">u2").tobytes()}, "big")
    with open_checkpoint(tmp_path) as ck:
        assert ck.raw("w").tolist() == [1.5, -2.0] and ck.raw("w").dtype.isnative and not mmap_backed(ck.raw("w"))
        assert ck.f32("b") == 1.0 and ck.info("b") == ("bf16", ())


@pytest.mark.parametrize("opcodes", [
    lambda cmd: p_call(p_global("os", "system"), p_str(cmd)),                                   # GLOBAL + REDUCE
    lambda cmd: b"\x80\x04" + p_str("os") + p_str("system") + b"\x93" + p_tuple(p_str(cmd)) + b"R",  # STACK_GLOBAL
    lambda cmd: b"(" + p_str(cmd) + b"ios\nsystem\n",                                             # INST
    lambda cmd: p_call(p_global("builtins", "eval"), p_str(f"__import__('os').system({cmd!r})")),
], ids=["GLOBAL", "STACK_GLOBAL", "INST", "eval"])
def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path, monkeypatch, opcodes):
    marker, calls = tmp_path / "pwned", []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    pkl = p_state_dict({"w": p_tensor("FloatStorage", "0", 1, 0, (1,), (1,))})[:-2]
    pkl += p_str("x") + opcodes(f"touch {marker}") + b"u."
    path = tmp_path / "pytorch_model.bin"
    write_torch_zip(path, pkl, {"0": bytes(4)})
    target = "builtins.eval" if b"eval" in pkl else "os.system"
    assert message(tmp_path) == f"{path}: refusing to unpickle '{target}': a checkpoint may only hold tensors"
    assert not marker.exists() and calls == []


def test_legacy_and_non_zip_files(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    shutil.copy(FIXTURES / "legacy.bin", path)
    assert message(tmp_path) == (f"{path}: this is the legacy (pre-1.6, non-zip) torch checkpoint format, which "
                                 f"Petit does not read; load it with torch and re-save it as safetensors, e.g. "
                                 f"`safetensors.torch.save_file(torch.load(path), 'model.safetensors')`")
    path.write_bytes(b"hello, not a checkpoint")
    assert message(tmp_path) == f"{path}: not a torch checkpoint (not a zip archive; truncated or a different format)"
    path.write_bytes((FIXTURES / "state_dict.bin").read_bytes()[:-100])
    assert "not a torch checkpoint" in message(tmp_path)


TORCH_CORRUPT = {
    "missing storage": ({"w": p_tensor("FloatStorage", "7", 2, 0, (2,), (1,))}, {},
                        "tensor 'w': its storage member 'archive/data/7' is missing from the archive"),
    "storage bytes": ({"w": p_tensor("FloatStorage", "0", 2, 0, (2,), (1,))}, {"0": bytes(4)},
                      "tensor 'w': storage 'archive/data/0' holds 4 bytes, but 2 x torch.FloatStorage need 8"),
    "out of storage": ({"w": p_tensor("HalfStorage", "0", 4, 1, (2, 2), (2, 1))}, {"0": bytes(8)},
                       "tensor 'w': size (2, 2), stride (2, 1) and offset 1 reach element 4, past the 4 elements "
                       "of its storage"),
    "overlapping": ({"w": p_tensor("HalfStorage", "0", 4, 0, (2, 2), (1, 1))}, {"0": bytes(8)},
                    "tensor 'w': stride (1, 1) for size (2, 2) is not a permutation of contiguous strides "
                    "(expanded, overlapping or gapped tensors are not supported)"),
    "gapped": ({"w": p_tensor("HalfStorage", "0", 8, 0, (2, 2), (4, 1))}, {"0": bytes(16)},
               "tensor 'w': stride (4, 1) for size (2, 2) is not a permutation of contiguous strides "
               "(expanded, overlapping or gapped tensors are not supported)"),
    "unsupported storage": ({"w": p_tensor("ComplexFloatStorage", "0", 1, 0, (1,), (1,))}, {"0": bytes(8)},
                            "tensor storage type 'torch.ComplexFloatStorage' is not supported (supported: "
                            "FloatStorage, HalfStorage, BFloat16Storage, DoubleStorage, LongStorage, IntStorage, "
                            "ShortStorage, CharStorage, ByteStorage, BoolStorage)"),
    "not a tensor": ({"w": p_int(3)}, {}, "tensor 'w': value is a int, not a tensor (expected a flat state dict)"),
}


@pytest.mark.parametrize("case", TORCH_CORRUPT)
def test_corrupt_torch_bin_errors(tmp_path, case):
    items, storages, expected_message = TORCH_CORRUPT[case]
    path = tmp_path / "pytorch_model.bin"
    write_torch_zip(path, p_state_dict(items), storages)
    assert message(tmp_path) == f"{path}: {expected_message}"


def test_torch_bin_bad_pickle_and_top_level(tmp_path):
    path = tmp_path / "pytorch_model.bin"
    write_torch_zip(path, b"\x80\x02]q\x00.")  # a list
    assert message(tmp_path) == f"{path}: expected a state dict (a dict of tensors), found list"
    write_torch_zip(path, p_state_dict({"w": p_tensor("FloatStorage", "0", 1, 0, (1,), (1,))})[:-5])
    assert message(tmp_path).startswith(f"{path}: archive/data.pkl is not a valid checkpoint pickle (")
