"""Reading and writing GGUF files (petit/formats/gguf.py): every metadata type and tensor round-trips, views are
zero-copy, and each kind of damage is one clear error naming the file and the field: truncation anywhere, a string or
array longer than the file, an array count that would overflow, an unknown value or tensor type, an offset not on
the alignment, data past the end, a big-endian or unknown version, duplicates."""
import struct

import numpy as np
import pytest

from petit import native as K
from petit.formats.gguf import GGUFError, GGUFFile, is_gguf, write_gguf

W = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)


def _write(path, meta=None, tensors=None, **kw):
    meta = {"general.architecture": "llama", "a.n": 7} if meta is None else meta
    tensors = {"t.weight": ("F32", (8, 64), W), "q.weight": ("Q8_0", (8, 64), K.quantize(W, "q8_0"))} \
        if tensors is None else tensors
    write_gguf(path, meta, tensors, **kw)
    return path


def _open_error(path) -> str:
    with pytest.raises(GGUFError) as e:
        GGUFFile(path)
    return str(e.value)


def test_every_metadata_type_and_tensor_round_trips(tmp_path):
    meta = {"s": "héllo", "u32": 7, "neg": -3, "f": 0.5, "b": False, "u8": np.uint8(200), "i16": np.int16(-2),
            "u64": np.uint64(1 << 40), "f64": np.float64(0.25), "strs": ["a", "", "ü"], "ints": [1, -2, 3],
            "floats": np.array([0.5, 1.5], np.float32), "bools": np.array([True, False])}
    path = _write(tmp_path / "m.gguf", meta)
    with GGUFFile(path) as f:
        assert f.version == 3 and f.alignment == 32
        got = dict(f.metadata)
        for k in ("floats", "ints", "bools"):
            got[k] = got[k].tolist()
        assert got == {"s": "héllo", "u32": 7, "neg": -3, "f": 0.5, "b": False, "u8": 200, "i16": -2,
                       "u64": 1 << 40, "f64": 0.25, "strs": ["a", "", "ü"], "ints": [1, -2, 3], "floats": [0.5, 1.5],
                       "bools": [True, False]}
        assert [(t.name, t.type, t.shape, t.offset, t.nbytes) for t in f.tensors.values()] == [
            ("t.weight", "F32", (8, 64), 0, 2048), ("q.weight", "Q8_0", (8, 64), 2048, 8 * 68)]
        view = f.raw("t.weight")
        assert not view.flags.writeable and np.array_equal(view.view(np.float32).reshape(8, 64), W)
        assert np.array_equal(f.raw("q.weight"), K.quantize(W, "q8_0").reshape(-1))
    assert is_gguf(path) and not is_gguf(tmp_path) and not is_gguf(tmp_path / "missing")


def test_a_larger_alignment_is_honoured(tmp_path):
    with GGUFFile(_write(tmp_path / "m.gguf", alignment=256)) as f:
        assert f.alignment == 256 and f.tensors["q.weight"].offset == 2048


def test_a_file_cut_anywhere_is_one_clear_error(tmp_path):
    data = _write(tmp_path / "m.gguf").read_bytes()
    seen = set()
    table_end = data.index(b"q.weight") + 40       # every byte of the header and table, then steps through the data
    for n in [*range(table_end), *range(table_end, len(data) - 1, 97)]:
        (tmp_path / "cut.gguf").write_bytes(data[:n])
        msg = _open_error(tmp_path / "cut.gguf")
        assert msg.startswith(f"{tmp_path / 'cut.gguf'}: ")
        seen.add(msg.split(": ")[1])
    # what the message names moves along the file: header, metadata keys and values, tensors, then the data
    assert seen == {"header", "metadata entry 0 (key)",
                    "metadata 'general.architecture' (type)", "metadata 'general.architecture'",
                    "metadata entry 1 (key)", "metadata 'a.n' (type)", "metadata 'a.n'", "tensor 0 (name)",
                    "tensor 't.weight' (dimensions)", "tensor 't.weight' (dimension 0)", "tensor 't.weight' (dimension 1)",
                    "tensor 't.weight' (type)", "tensor 't.weight' (offset)", "tensor 1 (name)",
                    "tensor 'q.weight' (dimensions)", "tensor 'q.weight' (dimension 0)", "tensor 'q.weight' (dimension 1)",
                    "tensor 'q.weight' (type)", "tensor 'q.weight' (offset)", "tensor 't.weight'", "tensor 'q.weight'"}


def test_each_kind_of_damage_is_named(tmp_path):
    path = _write(tmp_path / "m.gguf")
    data = bytearray(path.read_bytes())
    key_len_at = 24                                   # the first key's length follows magic, version and counts

    def damaged(patch):
        d = bytearray(data)
        patch(d)
        (tmp_path / "bad.gguf").write_bytes(bytes(d))
        return _open_error(tmp_path / "bad.gguf").split(": ", 1)[1]

    assert damaged(lambda d: d.__setitem__(slice(0, 4), b"GGUG")) == "magic: expected GGUF, found b'GGUG'"
    assert damaged(lambda d: d.__setitem__(slice(4, 8), struct.pack(">I", 3))) == (
        "version: 0x3000000 reads as a big-endian file (3 byte-swapped): only little-endian GGUF files are supported")
    assert damaged(lambda d: d.__setitem__(slice(4, 8), struct.pack("<I", 9))) == (
        "version: GGUF version 9 is not supported (versions 2 and 3 are)")
    assert damaged(lambda d: d.__setitem__(slice(key_len_at, key_len_at + 8), struct.pack("<Q", 1 << 40))) == (
        f"metadata entry 0 (key): a string of {1 << 40} bytes is longer than the {len(data) - 32} bytes left in "
        f"the file")
    type_at = key_len_at + 8 + len("general.architecture")
    assert damaged(lambda d: d.__setitem__(slice(type_at, type_at + 4), struct.pack("<I", 13))) == (
        "metadata 'general.architecture': unknown value type 13")
    # an array of 2^61 int32 values: its size would overflow 64 bits, and is refused before any allocation
    arr = _write(tmp_path / "arr.gguf", {"ids": [1, 2]}, {}).read_bytes()
    at = 24 + 8 + 3 + 4 + 4
    (tmp_path / "bad.gguf").write_bytes(arr[:at] + struct.pack("<Q", 1 << 61) + arr[at + 8:])
    assert _open_error(tmp_path / "bad.gguf").split(": ", 1)[1] == (
        f"metadata 'ids': an array of {1 << 61} int32 values ({1 << 63} bytes) is longer than the 13 bytes left in "
        f"the file")


def _tensor_field(data: bytes, name: str) -> int:
    """Where tensor `name`'s entry starts in the table (its name's length field)."""
    return data.index(struct.pack("<Q", len(name)) + name.encode())


def test_tensor_damage_is_named(tmp_path):
    data = _write(tmp_path / "m.gguf").read_bytes()
    q = _tensor_field(data, "q.weight") + 8 + len("q.weight")     # n_dims, ne[0], ne[1], type, offset

    def damaged(at, fmt, value):
        d = data[:at] + struct.pack(fmt, value) + data[at + struct.calcsize(fmt):]
        (tmp_path / "bad.gguf").write_bytes(d)
        return _open_error(tmp_path / "bad.gguf").split(": ", 1)[1]

    assert damaged(q, "<I", 5) == "tensor 'q.weight': 5 dimensions (1 to 4 are allowed)"
    assert damaged(q + 20, "<I", 99) == "tensor 'q.weight': unknown tensor type 99"
    assert damaged(q + 4, "<Q", 48) == "tensor 'q.weight': a row of 48 values does not divide into Q8_0 blocks of 32"
    assert damaged(q + 24, "<Q", 2050) == "tensor 'q.weight': offset 2050 is not a multiple of the alignment 32"
    assert damaged(q + 24, "<Q", 1 << 20) == (
        f"tensor 'q.weight': its 544 bytes at offset {1 << 20} of the data section run past the end of the file "
        f"(the data section holds 2592 bytes)")
    assert damaged(q + 12, "<Q", 1 << 61) == "tensor 'q.weight': shape (2305843009213693952, 64) is too large"


def test_duplicates_and_missing_files(tmp_path):
    with pytest.raises(GGUFError, match="no such tensor"):
        with GGUFFile(_write(tmp_path / "m.gguf")) as f:
            f.raw("nope")
    assert _open_error(tmp_path / "missing.gguf") == f"{tmp_path / 'missing.gguf'}: file not found"
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF\x03\x00")
    assert _open_error(tmp_path / "tiny.gguf").endswith("header: the file is 6 bytes, shorter than a GGUF header")
    data = _write(tmp_path / "two.gguf", {"k": 1, "j": 2}).read_bytes().replace(b"\x01\x00\x00\x00\x00\x00\x00\x00j",
                                                                                b"\x01\x00\x00\x00\x00\x00\x00\x00k")
    (tmp_path / "two.gguf").write_bytes(data)
    assert _open_error(tmp_path / "two.gguf").endswith("metadata 'k': the key appears twice")


def test_the_writer_refuses_what_it_cannot_store(tmp_path):
    with pytest.raises(GGUFError, match="tensor 't': 12 bytes, a F32 tensor of shape \\(2, 2\\) has 16"):
        write_gguf(tmp_path / "x.gguf", {}, {"t": ("F32", (2, 2), np.zeros(3, np.float32))})
    with pytest.raises(GGUFError, match="metadata 'k': cannot store a value of type dict"):
        write_gguf(tmp_path / "x.gguf", {"k": {}}, {})
    assert not list(tmp_path.iterdir())                 # nothing half-written


def _string_array(tmp_path, strings: list) -> bytes:
    return _write(tmp_path / "s.gguf", {"v": strings}, {}).read_bytes()


def test_string_arrays_read_at_once_equal_string_by_string(tmp_path):
    # a vocabulary's texts are one UTF-8 decode of the bytes between lengths walked in C
    # (native.prefixed_starts); the string-by-string reading is the reference
    from petit.formats.gguf import _Cursor
    rng = np.random.default_rng(5)
    pool = ["a", "", "é", "日本", "🙂x", "Ġthe", " ", "\u2581b", "\x00"]
    for n in (0, 1, 2, 7, 63, 300):
        strings = ["".join(rng.choice(pool, rng.integers(0, 4))) for _ in range(n)]
        data = _string_array(tmp_path, strings)
        with GGUFFile(tmp_path / "s.gguf") as f:
            assert f.metadata["v"] == strings
        at = data.index(b"v") + 1 + 4 + 4            # the array's length: after the key, value and element types
        fast, ref = _Cursor(data, "f"), _Cursor(data, "f")
        fast.pos = ref.pos = at + 8
        assert fast._strings(n, "v") == ref._strings_one_by_one(n, "v") == strings and fast.pos == ref.pos


def test_a_damaged_string_array_names_the_string(tmp_path):
    data = _string_array(tmp_path, ["xy", "zzz"])
    first = data.index(b"v") + 1 + 4 + 4 + 8 + 8      # the first string's bytes: after the types and two lengths
    second = first + 2 + 8

    def error(patch) -> str:
        d = bytearray(data)
        patch(d)
        (tmp_path / "bad.gguf").write_bytes(bytes(d))
        return _open_error(tmp_path / "bad.gguf").split(": ", 1)[1]

    # "é" cut between two strings: the bytes decode together, but neither string alone
    assert error(lambda d: (d.__setitem__(slice(first, first + 2), b"a\xc3"),
                            d.__setitem__(slice(second, second + 3), b"\xa9bc"))) == (
        "metadata 'v'[0]: not valid UTF-8 (unexpected end of data at byte 1)")
    assert error(lambda d: d.__setitem__(second, 0xFF)) == (
        "metadata 'v'[1]: not valid UTF-8 (invalid start byte at byte 0)")
    assert error(lambda d: d.__setitem__(slice(second - 8, second), struct.pack("<Q", 1 << 20))) == (
        f"metadata 'v'[1]: a string of {1 << 20} bytes is longer than the {len(data) - second} bytes left in the "
        f"file")
