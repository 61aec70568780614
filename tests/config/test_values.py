"""`kppo.config.values`: values checked against a field's annotated type; YAML errors that name file and line."""

import pytest
import yaml

from kppo.config.values import coerce, read_text, yaml_problem


@pytest.mark.parametrize(
    "type_name, value, want",
    [
        ("int", "1e5", 100000),
        ("int", 2.0, 2),
        ("float", "3e-4", 3e-4),
        ("bool | None", None, None),
        ("tuple[int, ...]", [64, 64], (64, 64)),
        ("str", "relu", "relu"),
    ],
)
def test_values_of_the_annotated_type_are_accepted_in_any_spelling_yaml_gives(type_name, value, want):
    assert coerce("field", type_name, value) == want


@pytest.mark.parametrize(
    "type_name, value, message",
    [
        ("int", 100000.5, "^field: expected an integer, got 100000.5$"),
        ("int", True, "^field: expected an integer, got True$"),
        ("float", float("nan"), "^field: expected a finite number, got nan$"),
        ("bool", "yes", "^field: expected true or false, got 'yes'$"),
        ("tuple[int, ...]", [64, 0], r"^field: expected a list of positive integers, got \[64, 0\]$"),
    ],
)
def test_other_values_are_one_line_errors_naming_the_field(type_name, value, message):
    with pytest.raises(ValueError, match=message):
        coerce("field", type_name, value)


def test_yaml_errors_name_the_file_and_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [1, 2\n")
    text, name = read_text(path)
    assert name == repr(str(path))
    with pytest.raises(yaml.YAMLError) as err:
        yaml.safe_load(text)
    assert yaml_problem(err.value).startswith("at line 3, column 1:")
    with pytest.raises(ValueError, match=r"^config YAML: expected an existing file, got '.*missing.yaml'$"):
        read_text(tmp_path / "missing.yaml")
