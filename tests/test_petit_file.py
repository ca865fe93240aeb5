"""Tests for the .petit file reader/writer (petit/formats/petit_file.py)."""

import os
import struct

import numpy as np
import pytest

from test_kernels_integrity import pt64_oracle
from petit.formats.petit_file import (
    ALIGNMENT, BLOCKS, DTYPE_CODES, MAGIC, ROW_HEADERS, VERSION, PetitFile, PetitFileError, TensorInfo, read_petit,
    tensor_nbytes, write_petit,
)

# Header field offsets, as documented in docs/petit-format.md.
OFF_MAGIC, OFF_VERSION, OFF_ALIGNMENT, OFF_META_SIZE, OFF_N_TENSORS = 0, 8, 12, 16, 24
OFF_TABLE_OFFSET, OFF_DATA_OFFSET, OFF_FILE_SIZE = 32, 40, 48

META = {
    "format": "petit",
    "config": {"model_type": "llama", "hidden_size": 64, "rms_norm_eps": 1e-5, "tie_word_embeddings": True},
    "tokenizer": {"type": "bpe", "vocab": ["a", "b", "é", "日本"], "merges": [["a", "b"]], "bos_token": None},
    "chat_template": "{{ messages }}",
}


def rng():
    return np.random.default_rng(1234)


def all_dtype_tensors():
    r = rng()
    return {
        "model.norm.weight": ("f32", (64,), r.standard_normal(64).astype(np.float32)),
        "f32.3d": ("f32", (2, 3, 5), r.standard_normal((2, 3, 5)).astype(np.float32)),
        "f16.w": ("f16", (3, 7), r.standard_normal((3, 7)).astype(np.float16)),
        "bf16.w": ("bf16", (4, 5), r.integers(0, 2**16, (4, 5), dtype=np.uint16)),
        "q8.w": ("q8_0", (4, 64), r.integers(0, 256, 4 * 2 * 34, dtype=np.uint8).tobytes()),
        "q4.w": ("q4_0", (2, 1, 3, 96), r.integers(0, 256, (2, 1, 3, 3 * 18), dtype=np.uint8)),
        "q5.w": ("q5_0", (3, 64), r.integers(0, 256, 3 * 2 * 22, dtype=np.uint8).tobytes()),
        "q4k.w": ("q4_k", (2, 512), r.integers(0, 256, (2, 2 * 144), dtype=np.uint8)),
        "q5k.w": ("q5_k", (1, 256), r.integers(0, 256, 176, dtype=np.uint8).tobytes()),
        "q6k.w": ("q6_k", (3, 256), r.integers(0, 256, (3, 210), dtype=np.uint8)),
    }


def stored_bytes(data):
    return data.tobytes() if isinstance(data, np.ndarray) else bytes(data)


def header(path):
    raw = path.read_bytes()
    names = ["magic", "version", "alignment", "meta_size", "n_tensors", "table_offset", "data_offset",
             "file_size", "reserved"]
    return dict(zip(names, struct.unpack_from("<8sIIQQQQQQ", raw, 0)))


def patch(path, offset, fmt, *values):
    buf = bytearray(path.read_bytes())
    struct.pack_into(fmt, buf, offset, *values)
    path.write_bytes(bytes(buf))


def entry_offsets(path, index=0):
    """Absolute offsets of the fields of tensor table entry `index`."""
    buf = path.read_bytes()
    pos = header(path)["table_offset"]
    for i in range(index + 1):
        (name_len,) = struct.unpack_from("<I", buf, pos)
        ndim = struct.unpack_from("<I", buf, pos + 8 + name_len)[0]
        f = {"name_len": pos, "name": pos + 4, "dtype": pos + 4 + name_len, "ndim": pos + 8 + name_len,
             "shape": pos + 12 + name_len, "offset": pos + 12 + name_len + 8 * ndim,
             "nbytes": pos + 20 + name_len + 8 * ndim}
        pos = f["nbytes"] + 8
    return f


@pytest.fixture
def small(tmp_path):
    """A valid file with one q8_0 tensor 'x.weight' [4, 64] and one f32 tensor 'y' [8] (no checksums: the tests
    patch its layout at fixed offsets)."""
    path = tmp_path / "model.petit"
    write_petit(path, {"a": 1}, {
        "x.weight": ("q8_0", (4, 64), bytes(272)),
        "y": ("f32", (8,), np.arange(8, dtype=np.float32)),
    }, checksums=False)
    return path


def expect_error(path, *parts):
    with pytest.raises(PetitFileError) as ei:
        PetitFile(path)
    msg = str(ei.value)
    assert str(path) in msg
    for part in parts:
        assert part in msg, msg
    return msg


# ---------------------------------------------------------------- round trip


def test_constants():
    assert MAGIC == b"PETIT\0\0\0" and VERSION == 1 and ALIGNMENT == 64
    assert DTYPE_CODES == {"f32": 0, "f16": 1, "bf16": 2, "q8_0": 3, "q4_0": 4, "q5_0": 5, "q4_k": 6, "q5_k": 7,
                           "q6_k": 8, "tq2": 9}
    assert BLOCKS == {"q8_0": (32, 34), "q4_0": (32, 18), "q5_0": (32, 22), "q4_k": (256, 144), "q5_k": (256, 176),
                      "q6_k": (256, 210), "tq2": (32, 8)}   # GGML's block_q5_0, ..., block_q6_K; BitNet's ternary rows
    assert ROW_HEADERS == {"tq2": 4}                         # with a float32 scale before each row
    assert issubclass(PetitFileError, ValueError)


def test_round_trip_every_dtype(tmp_path):
    path = tmp_path / "all.petit"
    tensors = all_dtype_tensors()
    write_petit(path, META, tensors)
    h = header(path)
    assert h["magic"] == MAGIC and h["version"] == 1 and h["alignment"] == 64 and h["reserved"] == 0
    assert h["table_offset"] == 64 + h["meta_size"] and h["data_offset"] % 64 == 0
    assert h["file_size"] == path.stat().st_size and h["n_tensors"] == len(tensors)
    with read_petit(path) as pf:
        assert pf.path == str(path)
        pt64 = {name: f"{pt64_oracle(stored_bytes(data)):016x}" for name, (_, _, data) in tensors.items()}
        assert pf.metadata == dict(META, checksums={"pt64": pt64})
        assert list(pf.tensors) == list(tensors)
        for name, (dtype, shape, data) in tensors.items():
            info = pf.tensors[name]
            assert info == TensorInfo(name, dtype, shape, info.offset, tensor_nbytes(dtype, shape))
            assert info.offset % 64 == 0
            raw = pf.raw(name)
            assert raw.dtype == np.uint8 and raw.tobytes() == stored_bytes(data)
            arr = pf.array(name)
            for view in (raw, arr):
                assert view.base is not None and not view.flags.owndata and not view.flags.writeable
            if dtype in BLOCKS:
                assert arr.dtype == np.uint8
                assert arr.shape == shape[:-1] + (shape[-1] // BLOCKS[dtype][0] * BLOCKS[dtype][1],)
            else:
                assert arr.dtype == {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[dtype]
                assert arr.shape == shape
                np.testing.assert_array_equal(arr, data)
            assert arr.tobytes() == stored_bytes(data)
        # tensors are laid out in insertion order, without overlap, and the file ends with the last one
        infos = list(pf.tensors.values())
        for a, b in zip(infos, infos[1:]):
            assert a.offset + a.nbytes <= b.offset < a.offset + a.nbytes + 64
        assert h["data_offset"] + infos[-1].offset + infos[-1].nbytes == h["file_size"]


def test_padding_is_zero(tmp_path):
    path = tmp_path / "pad.petit"
    write_petit(path, {}, {"a": ("f32", (3,), np.ones(3, np.float32)), "b": ("f16", (5,), np.ones(5, np.float16))},
                checksums=False)
    buf = path.read_bytes()
    h = header(path)
    with read_petit(path) as pf:
        b = pf.tensors["b"]
        assert buf[h["data_offset"] + 12:h["data_offset"] + b.offset] == bytes(b.offset - 12)
        assert pf.metadata == {}


def test_empty_file_no_tensors(tmp_path):
    path = tmp_path / "empty.petit"
    write_petit(path, {"x": []}, {})
    with read_petit(path) as pf:
        assert pf.metadata == {"x": [], "checksums": {"pt64": {}}} and pf.tensors == {}


def test_writer_accepts_raw_uint8_and_bytes_for_any_dtype(tmp_path):
    path = tmp_path / "raw.petit"
    f32 = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    write_petit(path, {}, {
        "a": ("f32", (3, 4), f32.tobytes()),
        "b": ("f32", (3, 4), np.frombuffer(f32.tobytes(), np.uint8)),
        "c": ("f32", (3, 4), np.asfortranarray(f32)),  # non-contiguous input is stored C-ordered
        "d": ("f32", (3, 4), f32.astype(">f4")),  # big-endian input is stored little-endian
        "e": ("bf16", (4,), bytearray(8)),
        "f": ("f16", (2,), memoryview(np.ones(2, np.float16).tobytes())),
        "g": ("q4_0", [np.int64(1), np.int32(32)], bytes(18)),  # list shape with numpy ints
    })
    with read_petit(path) as pf:
        for name in "abcd":
            np.testing.assert_array_equal(pf.array(name), f32)
        assert pf.raw("e").tobytes() == bytes(8)
        np.testing.assert_array_equal(pf.array("f"), [1, 1])
        assert pf.tensors["g"].shape == (1, 32) and pf.array("g").shape == (1, 18)


def test_views_are_zero_copy(tmp_path):
    path = tmp_path / "big.petit"
    big = np.ones((1024, 1024), dtype=np.float32)  # 4 MiB
    write_petit(path, {}, {"big": ("f32", big.shape, big)})
    with read_petit(path) as pf:
        r1, r2, arr = pf.raw("big"), pf.raw("big"), pf.array("big")
        assert np.shares_memory(r1, r2) and np.shares_memory(r1, arr)
        assert not r1.flags.owndata and not arr.flags.owndata
        assert arr.base is not None and arr.nbytes == big.nbytes
        with pytest.raises(ValueError):
            arr[0, 0] = 2.0
        del r1, r2, arr


def test_close_with_live_views_does_not_raise(small):
    pf = read_petit(small)
    view = pf.array("y")
    pf.close()  # views still alive: must not raise BufferError
    pf.close()  # idempotent
    np.testing.assert_array_equal(view, np.arange(8))  # the mapping stays valid while referenced
    with pytest.raises(PetitFileError, match="closed"):
        pf.raw("y")
    assert pf.metadata == {"a": 1} and "y" in pf.tensors


def test_context_manager_closes(small):
    with read_petit(small) as pf:
        assert float(pf.array("y").sum()) == 28.0
    with pytest.raises(PetitFileError, match="closed"):
        pf.array("y")


def test_missing_tensor(small):
    with read_petit(small) as pf:
        for fn in (pf.raw, pf.array):
            with pytest.raises(PetitFileError) as ei:
                fn("nope.weight")
            assert str(small) in str(ei.value) and "'nope.weight'" in str(ei.value)


# ---------------------------------------------------------------- tensor_nbytes


def test_tensor_nbytes():
    assert tensor_nbytes("f32", (4, 64)) == 1024
    assert tensor_nbytes("f16", [3, 5]) == 30
    assert tensor_nbytes("bf16", (7,)) == 14
    assert tensor_nbytes("q8_0", (4, 64)) == 272
    assert tensor_nbytes("q4_0", (2, 3, 96)) == 2 * 3 * 3 * 18
    assert tensor_nbytes("f32", (np.int64(2), 3)) == 24


@pytest.mark.parametrize("dtype,shape,part", [
    ("q8_0", (4, 48), "(4, 48)"), ("q4_0", (33,), "(33,)"), ("f32", (0, 4), "(0, 4)"),
    ("f32", (-1,), "(-1,)"), ("f32", (), "()"), ("f64", (4,), "f64"),
])
def test_tensor_nbytes_errors(dtype, shape, part):
    with pytest.raises(ValueError, match=part.replace("(", r"\(").replace(")", r"\)")):
        tensor_nbytes(dtype, shape)


# ---------------------------------------------------------------- writer: validation and atomicity


@pytest.mark.parametrize("metadata,tensors,parts", [
    ({}, {"x.weight": ("q8_0", (4, 64), bytes(100))}, ["tensor 'x.weight'", "100 bytes", "expected 272"]),
    ({}, {"x": ("f8", (4,), bytes(4))}, ["tensor 'x'", "unknown dtype 'f8'"]),
    ({}, {"x": ("q4_0", (4, 40), bytes(4))}, ["tensor 'x'", "(4, 40)", "multiple of 32"]),
    ({}, {"x": ("f32", (1, 1, 1, 1, 1), bytes(4))}, ["tensor 'x'", "ndim 5"]),
    ({}, {"x": ("f32", (), bytes(4))}, ["tensor 'x'", "ndim 0"]),
    ({}, {"x": ("f32", (4, 0), b"")}, ["tensor 'x'", "(4, 0)"]),
    ({}, {"x": ("f32", (-4,), bytes(16))}, ["tensor 'x'", "(-4,)"]),
    ({}, {"": ("f32", (1,), bytes(4))}, ["tensor ''", "name_len 0"]),
    ({}, {"n" * 1025: ("f32", (1,), bytes(4))}, ["name_len 1025"]),
    ({}, {"x": ("f32", (2,), np.zeros(2, np.float64))}, ["tensor 'x'", "float64"]),
    ({}, {"x": ("f16", (2,), np.zeros(2, np.float32))}, ["tensor 'x'", "float32"]),
    ({}, {"x": ("f32", (2, 3), np.zeros((3, 2), np.float32))}, ["tensor 'x'", "(3, 2)", "(2, 3)"]),
    ({}, {"x": ("f32", (2,), [1.0, 2.0])}, ["tensor 'x'", "list"]),
    ({}, {"x": ("f32", (2,))}, ["tensor 'x'", "(dtype, shape, data)"]),
    ({"a": object()}, {}, ["metadata", "object"]),
    ({"a": float("nan")}, {}, ["metadata"]),
    ([1, 2], {}, ["metadata must be a dict"]),
])
def test_write_validation_errors(tmp_path, metadata, tensors, parts):
    path = tmp_path / "w.petit"
    with pytest.raises(PetitFileError) as ei:
        write_petit(path, metadata, tensors)
    msg = str(ei.value)
    assert str(path) in msg
    for part in parts:
        assert part in msg, msg
    assert os.listdir(tmp_path) == []


def test_failed_write_leaves_existing_file_untouched(small):
    before = small.read_bytes()
    good = ("f32", (8,), np.zeros(8, np.float32))
    with pytest.raises(PetitFileError, match="expected 272"):
        write_petit(small, {"b": 2}, {"y": good, "x.weight": ("q8_0", (4, 64), bytes(100))})
    assert small.read_bytes() == before
    assert os.listdir(small.parent) == [small.name]


def test_failure_during_write_removes_temp_file(small, monkeypatch):
    before = small.read_bytes()

    def boom(src, dst):
        assert os.path.dirname(os.path.abspath(src)) == os.path.dirname(os.path.abspath(dst))
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk on fire"):
        write_petit(small, {}, {"z": ("f32", (1,), bytes(4))})
    assert small.read_bytes() == before
    assert os.listdir(small.parent) == [small.name]


def test_overwrite_replaces_file(small):
    write_petit(small, {"v": 2}, {"z": ("f16", (2,), np.ones(2, np.float16))})
    assert os.listdir(small.parent) == [small.name]
    with read_petit(small) as pf:
        z = f"{pt64_oracle(bytes(np.ones(2, np.float16))):016x}"
        assert pf.metadata == {"v": 2, "checksums": {"pt64": {"z": z}}}
        assert list(pf.tensors) == ["z"]


# ---------------------------------------------------------------- reader: header errors


def test_missing_file(tmp_path):
    expect_error(tmp_path / "nothing.petit", "not found")


def test_directory_is_rejected(tmp_path):
    expect_error(tmp_path, "cannot open")


@pytest.mark.parametrize("size", [0, 10, 63])
def test_shorter_than_header(tmp_path, size):
    path = tmp_path / "short.petit"
    path.write_bytes((MAGIC + bytes(64))[:size])
    expect_error(path, "header", f"file is {size} bytes")


def test_truncated(small):
    size = small.stat().st_size
    small.write_bytes(small.read_bytes()[:size - 10])
    expect_error(small, "file_size", f"truncated: header says {size} bytes, file has {size - 10}")


def test_trailing_data(small):
    size = small.stat().st_size
    small.write_bytes(small.read_bytes() + b"junk")
    expect_error(small, "file_size", f"header says {size} bytes, file has {size + 4}")


def test_wrong_magic(small):
    patch(small, OFF_MAGIC, "8s", b"GGUF\3\0\0\0")
    expect_error(small, "magic", "GGUF")


def test_unsupported_version(small):
    patch(small, OFF_VERSION, "<I", 2)
    expect_error(small, "version", "unsupported version 2")


def test_wrong_alignment(small):
    patch(small, OFF_ALIGNMENT, "<I", 32)
    expect_error(small, "alignment", "32")


def test_absurd_meta_size(small):
    patch(small, OFF_META_SIZE, "<Q", 2**62)
    expect_error(small, "meta_size", str(2**62))


def test_table_offset_mismatch(small):
    patch(small, OFF_TABLE_OFFSET, "<Q", header(small)["table_offset"] + 1)
    expect_error(small, "table_offset", "64 + meta_size")


def test_data_offset_not_aligned(small):
    patch(small, OFF_DATA_OFFSET, "<Q", header(small)["data_offset"] + 8)
    expect_error(small, "data_offset", "not a multiple of 64")


def test_data_offset_past_file(small):
    patch(small, OFF_DATA_OFFSET, "<Q", 2**40)
    expect_error(small, "data_offset", str(2**40))


def test_absurd_n_tensors(small):
    patch(small, OFF_N_TENSORS, "<Q", 2**60)
    expect_error(small, "n_tensors", str(2**60))


# ---------------------------------------------------------------- reader: metadata errors


def set_metadata_bytes(path, new):
    """Overwrite the metadata block with `new`, padded with JSON whitespace to the same size."""
    size = header(path)["meta_size"]
    assert len(new) <= size
    patch(path, 64, f"{size}s", new.ljust(size, b" "))


def test_metadata_not_utf8(small):
    set_metadata_bytes(small, b'"\xff"')
    expect_error(small, "metadata", "UTF-8")


def test_metadata_not_json(small):
    set_metadata_bytes(small, b"{a:1")
    expect_error(small, "metadata", "not valid JSON")


def test_metadata_not_object(small):
    set_metadata_bytes(small, b"[1]")
    expect_error(small, "metadata", "must be a JSON object", "list")


def test_metadata_nan_constant(tmp_path):
    path = tmp_path / "nan.petit"
    write_petit(path, {"temperature": "xxxxxx"}, {})
    set_metadata_bytes(path, b'{"temperature":NaN}')
    expect_error(path, "metadata", "NaN")


# ---------------------------------------------------------------- reader: tensor table errors


def test_name_len_zero(small):
    patch(small, entry_offsets(small)["name_len"], "<I", 0)
    expect_error(small, "tensor #0 name_len", "0 is not in 1..1024")


def test_name_len_too_long(small):
    patch(small, entry_offsets(small)["name_len"], "<I", 5000)
    expect_error(small, "tensor #0 name_len", "5000")


def test_table_past_data_offset(small):
    patch(small, entry_offsets(small)["name_len"], "<I", 1024)
    expect_error(small, "tensor #0 name", "tensor table runs past data_offset")


def test_n_tensors_too_large(small):
    patch(small, OFF_N_TENSORS, "<Q", 3)  # only 2 entries exist; the 3rd reads the zero padding
    expect_error(small, "tensor #2 name_len", "0 is not in 1..1024")


def test_data_offset_too_small_for_table(small):
    patch(small, OFF_DATA_OFFSET, "<Q", 128)  # the two entries need 89 bytes from table_offset 71
    expect_error(small, "n_tensors", "cannot fit")


def test_invalid_utf8_name(small):
    patch(small, entry_offsets(small)["name"], "2s", b"\xc3\x28")
    expect_error(small, "tensor #0 name", "UTF-8")


def test_unknown_dtype_code(small):
    patch(small, entry_offsets(small)["dtype"], "<I", 10)
    expect_error(small, "tensor 'x.weight'", "unknown dtype code 10")


@pytest.mark.parametrize("ndim", [0, 5, 2**31])
def test_bad_ndim(small, ndim):
    patch(small, entry_offsets(small)["ndim"], "<I", ndim)
    expect_error(small, "tensor 'x.weight'", f"ndim {ndim}")


def test_zero_dim(small):
    patch(small, entry_offsets(small)["shape"], "<Q", 0)
    expect_error(small, "tensor 'x.weight'", "(0, 64)", "zero dimension")


def test_nbytes_mismatch(small):
    patch(small, entry_offsets(small)["nbytes"], "<Q", 100)
    expect_error(small, "tensor 'x.weight': nbytes 100 does not match dtype q8_0 and shape (4, 64) (expected 272)")


def test_huge_shape_does_not_allocate(small):
    patch(small, entry_offsets(small)["shape"], "<QQ", 2**40, 2**40)
    expect_error(small, "tensor 'x.weight'", "nbytes 272 does not match")


def test_block_dtype_last_dim_not_multiple_of_32(small):
    f = entry_offsets(small)
    patch(small, f["shape"], "<QQ", 8, 34)  # 8*34 = 272 elements, but 34 % 32 != 0
    expect_error(small, "tensor 'x.weight'", "(8, 34)", "multiple of 32")


def test_offset_not_aligned(small):
    patch(small, entry_offsets(small, 1)["offset"], "<Q", 320 + 4)
    expect_error(small, "tensor 'y'", "offset 324 is not a multiple of 64")


def test_tensor_past_end_of_file(small):
    patch(small, entry_offsets(small, 1)["offset"], "<Q", 64 * 100)
    expect_error(small, "tensor 'y'", "extends past the end of the file")


def test_tensor_offset_overflow_guard(small):
    patch(small, entry_offsets(small, 1)["offset"], "<Q", 2**64 - 64)
    expect_error(small, "tensor 'y'", "extends past the end of the file")


def test_duplicate_name(tmp_path):
    path = tmp_path / "dup.petit"
    write_petit(path, {}, {"a.w": ("f32", (2,), bytes(8)), "b.w": ("f32", (2,), bytes(8))})
    patch(path, entry_offsets(path, 1)["name"], "3s", b"a.w")
    expect_error(path, "tensor 'a.w'", "duplicate")


def test_error_is_never_a_low_level_exception(small):
    """Flip every header and table byte in turn: the reader either opens the file or raises PetitFileError."""
    good = small.read_bytes()
    h = header(small)
    for i in range(h["data_offset"]):
        for value in (0x00, 0xFF, good[i] ^ 0x01):
            buf = bytearray(good)
            buf[i] = value
            small.write_bytes(bytes(buf))
            try:
                PetitFile(small).close()
            except PetitFileError as e:
                assert str(small) in str(e)


def test_a_missing_output_folder_is_named_with_the_path_given(tmp_path):
    """The error named the temporary file (x.petit.tmp-<pid>-<n>), a name the user never gave."""
    out = tmp_path / "nonexistent" / "dir" / "x.petit"
    with pytest.raises(OSError) as e:
        write_petit(out, {}, {"a": ("f32", (3,), np.ones(3, np.float32))})
    assert str(e.value) == f"cannot write {out}: folder {out.parent} does not exist"
    assert e.value.filename == str(out) and e.value.strerror == f"folder {out.parent} does not exist"
    assert os.listdir(tmp_path) == []


def test_a_failed_write_names_the_target_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "m.petit"
    target.mkdir()                                    # the rename over it fails: it is a folder
    with pytest.raises(OSError) as e:
        write_petit(target, {}, {"a": ("f32", (3,), np.ones(3, np.float32))})
    assert str(e.value) == f"cannot write {target}: Is a directory"
    assert os.listdir(tmp_path) == ["m.petit"] and os.listdir(target) == []


def test_the_writer_records_a_checksum_of_every_tensor_that_reading_checks(tmp_path):
    path = tmp_path / "m.petit"
    tensors = all_dtype_tensors()
    write_petit(path, dict(META, checksums={"sha256": {"kept": "as given"}, "pt64": {"stale": "replaced"}}), tensors)
    with read_petit(path) as pf:
        assert pf.metadata["checksums"] == {
            "sha256": {"kept": "as given"},
            "pt64": {n: f"{pt64_oracle(stored_bytes(d)):016x}" for n, (_, _, d) in tensors.items()}}
        assert pf.check_checksums() is None


def test_a_file_read_into_memory_holds_the_same_bytes_and_is_no_longer_needed(tmp_path):
    """PetitFile(map_file=False) (petit.load(..., mmap=False), `--no-mmap`) reads the file into private memory
    instead of mapping it: every tensor holds the same bytes, the file is neither mapped nor open afterwards (it
    can be deleted while the model runs), and a damaged file is refused with the same message."""
    import sys
    path = tmp_path / "model.petit"
    data = {"x.weight": ("q8_0", (4, 64), bytes(range(256)) + bytes(16)), "y": ("f32", (8,), np.arange(8.0))}
    write_petit(path, {"a": 1}, {k: (d, s, np.asarray(v, np.float32) if d == "f32" else v)
                                 for k, (d, s, v) in data.items()})
    with PetitFile(path) as mapped:
        want = {name: bytes(mapped.raw(name)) for name in mapped.tensors}
    f = PetitFile(path, map_file=False)
    if sys.platform.startswith("linux"):
        with open("/proc/self/maps") as maps:
            assert str(path) not in maps.read()
        assert not any(os.path.realpath(os.path.join("/proc/self/fd", fd)) == str(path)
                       for fd in os.listdir("/proc/self/fd") if os.path.exists(os.path.join("/proc/self/fd", fd)))
    os.remove(path)
    assert {name: bytes(f.raw(name)) for name in f.tensors} == want
    assert f.check_checksums() is None
    f.close()
    write_petit(path, {"a": 1}, {"y": ("f32", (8,), np.arange(8, dtype=np.float32))}, checksums=False)
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:size - 10])
    with pytest.raises(PetitFileError) as e:
        PetitFile(path, map_file=False)
    assert str(e.value) == f"{path}: file_size: truncated: header says {size} bytes, file has {size - 10}"
