"""`kppo.sb3.saves.safe_pickle`: hand-written opcode streams (never given to `pickle`) read as data; the refusals."""

import pickletools

import numpy as np
import pytest

from kppo.sb3.saves.safe_pickle import NUMPY_NAMES, ORDERED_DICT, Instance, PickleRefused, read_pickle

# {"a": [1, 2.5, b"x"], "b": (True, None)} at protocol 2 (MARK, SETITEMS, APPENDS, BINPUT / BINGET)
PLAIN = (
    b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01G@\x04\x00\x00\x00\x00\x00\x00C\x01xeX\x01\x00\x00\x00b"
    b"\x88N\x86q\x03u."
)


def test_plain_containers_are_read_as_they_are():
    assert read_pickle(PLAIN, "plain.pkl", {}) == {"a": [1, 2.5, b"x"], "b": (True, None)}


def test_numpy_arrays_are_built_from_their_bytes_without_numpy_unpickling():
    # numpy._core.multiarray._reconstruct(numpy.ndarray, (0,), b'b') + BUILD (1, (2,), dtype('<f4'), False, bytes)
    raw = np.array([1.5, -2.0], np.float32).tobytes()
    stream = (
        b"\x80\x02cnumpy._core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R"
        b"(K\x01K\x02\x85cnumpy\ndtype\nX\x02\x00\x00\x00f4\x89\x88\x87R(K\x03X\x01\x00\x00\x00<NNNJ\xff\xff\xff\xff"
        b"J\xff\xff\xff\xffK\x00tb\x89C\x08" + raw + b"tb."
    )
    list(pickletools.genops(stream))  # a well-formed stream
    out = read_pickle(stream, "array.pkl", NUMPY_NAMES)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_array_equal(out, [1.5, -2.0])


def test_an_allowed_class_is_a_record_with_its_state():
    stream = b"\x80\x02cpkg.mod\nThing\n)\x81}X\x01\x00\x00\x00nK\x07sb."
    out = read_pickle(stream, "obj.pkl", {("pkg.mod", "Thing"): None})
    assert isinstance(out, Instance) and str(out.cls) == "pkg.mod.Thing" and out.state == {"n": 7}


@pytest.mark.parametrize(
    "stream, found",
    [
        (b"\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.", "builtins.eval"),  # a name not allowed
        (
            b"\x80\x02(cos\nsystem\nX\x02\x00\x00\x00lsi__main__\nX\n.",
            "opcode INST",
        ),  # INST: refused before any opcode runs
        (b"\x80\x02(X\x01\x00\x00\x00ao.", "opcode OBJ"),  # OBJ: an old-style call
        (b"\x80\x02\x82\x01.", "opcode EXT1"),  # the extension registry
        (b"\x80\x02X\x01\x00\x00\x00aQ.", "persistent id"),  # BINPERSID without a loader
        (b"\x80\x02}q\x00", "not one"),  # truncated: no STOP
        (b"\x80\x02h\x05.", "memo entry 5"),  # a memo entry never stored
    ],
)
def test_refusals_are_one_line_and_name_the_file(stream, found):
    with pytest.raises(PickleRefused) as err:
        read_pickle(stream, "bad.pkl", {**NUMPY_NAMES, **ORDERED_DICT})
    message = str(err.value)
    assert "\n" not in message and message.startswith("bad.pkl") and found in message, message


def test_object_arrays_are_refused():
    stream = b"\x80\x02cnumpy\ndtype\nX\x02\x00\x00\x00O8\x89\x88\x87R."
    with pytest.raises(PickleRefused, match="dtype 'O8'"):
        read_pickle(stream, "objects.pkl", NUMPY_NAMES)
