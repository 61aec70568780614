"""`kppo.sb3.save_util.open_path`, SB3's helper: the contract of SB3's own `test_open_file` and
`test_open_file_str_pathlib` (with bytes written and read back where SB3's test pickles: kppo never pickles)."""

import io
import pathlib
import warnings

import pytest

from kppo.sb3.save_util import open_path


@pytest.mark.parametrize("pathtype", [str, pathlib.Path])
def test_a_path_opens_in_binary_with_the_suffix_only_where_it_has_none(tmp_path, pathtype):
    with open_path(pathtype(tmp_path / "t1"), "w") as file:
        file.write(b"foo")
    assert file.closed and (tmp_path / "t1").read_bytes() == b"foo"
    with open_path(pathtype(tmp_path / "t1.custom_ext"), "w", suffix="pkl") as file:
        file.write(b"ext")
    assert (tmp_path / "t1.custom_ext").read_bytes() == b"ext"  # a path with a suffix keeps it
    with open_path(pathtype(tmp_path / "t2"), "write", suffix="pkl") as file:
        file.write(b"bar")
    assert (tmp_path / "t2.pkl").read_bytes() == b"bar" and not (tmp_path / "t2").exists()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with open_path(pathtype(tmp_path / "t2"), "r", suffix="pkl") as file:  # missing: tried with .pkl
            assert file.read() == b"bar"
        open_path(pathtype(tmp_path / "t2"), "read", suffix="pkl", verbose=2).close()
    assert len(record) == 1 and "t2.pkl" in str(record[0].message)
    with pytest.raises(FileNotFoundError, match="t3"):
        open_path(pathtype(tmp_path / "t3"), "r")


def test_writing_warns_on_overwrite_at_verbose_2_and_creates_missing_folders(tmp_path):
    (tmp_path / "t2.pkl").write_bytes(b"old")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for verbose in (0, 1, 2):
            open_path(tmp_path / "t2", "w", suffix="pkl", verbose=verbose).close()
    assert len(record) == 1 and "overwriting" in str(record[0].message)
    with pytest.warns(UserWarning, match="does not exist, creating it"):
        open_path(tmp_path / "new" / "deep" / "f", "w").close()
    assert (tmp_path / "new" / "deep" / "f").is_file()
    (tmp_path / "folder").mkdir()
    with pytest.warns(UserWarning, match="is a folder, writing .*folder_2"):
        open_path(tmp_path / "folder", "w").close()
    assert (tmp_path / "folder_2").is_file()


def test_an_open_stream_is_checked_and_returned_as_it_is(tmp_path):
    with pytest.raises(TypeError, match=r"^path: expected a str, a pathlib.Path or an open binary file .* got int$"):
        open_path(123, None, None, None)
    file = (tmp_path / "test1").open("wb")
    with pytest.raises(ValueError, match=r"^path: expected a readable file for mode 'r'$"):
        open_path(file, "r")
    with pytest.raises(ValueError, match=r"^mode: expected 'w', 'write', 'r' or 'read', got 'randomstuff'$"):
        open_path(file, "randomstuff")
    assert open_path(file, "w") is file
    file.close()
    with pytest.raises(ValueError, match=r"^path: expected an open file, got a closed one$"):
        open_path(file, "w")
    buffer = io.BytesIO()
    assert open_path(buffer, "w") is buffer and open_path(buffer, "r") is buffer
    buffer.close()
    with pytest.raises(ValueError, match="closed"):
        open_path(buffer, "w")
