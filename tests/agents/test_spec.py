"""Assignment and model.yaml validation: every error names the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.errors import InputError
from agents.spec import check_model_dirs, load_model_config, parse_assignment

pytestmark = pytest.mark.unit


def _doc(**server_overrides: object) -> str:
    server = {
        "name": "resnet50-a-0",
        "workload": "resnet50-a",
        "model_dir": "/models/resnet50",
        "batch": 8,
        "mps_percent": 30.0,
        "gpu_index": 0,
        "port": 8101,
        "max_queue_delay_ms": 5.0,
    }
    server.update(server_overrides)
    return json.dumps({"generation": 3, "servers": [server]})


def _error(text: str) -> InputError:
    with pytest.raises(InputError) as info:
        parse_assignment(text, "a.json")
    return info.value


def test_contract_example_parses_with_default_host() -> None:
    assignment = parse_assignment(_doc(), "a.json")
    server = assignment.servers[0]
    assert (assignment.generation, server.batch, server.mps_percent, server.host) == (3, 8, 30.0, "127.0.0.1")


@pytest.mark.parametrize(
    ("override", "field", "words"),
    [
        ({"batch": 0}, "servers[0].batch", "greater than or equal to 1"),
        ({"mps_percent": 0}, "servers[0].mps_percent", "greater than 0"),
        ({"mps_percent": 100.5}, "servers[0].mps_percent", "less than or equal to 100"),
        ({"port": 70000}, "servers[0].port", "less than or equal to 65535"),
        ({"name": "bad name/"}, "servers[0].name", "pattern"),
        ({"colour": "red"}, "servers[0].colour", "unknown key"),
        ({"batch": "eight"}, "servers[0].batch", "integer"),
    ],
)
def test_bad_server_fields_are_named(override: dict, field: str, words: str) -> None:
    err = _error(_doc(**override))
    assert (err.source, err.field) == ("a.json", field)
    assert words in err.message


def test_missing_field_and_unknown_top_level_key() -> None:
    doc = json.loads(_doc())
    del doc["servers"][0]["port"]
    assert _error(json.dumps(doc)).field == "servers[0].port"
    assert (
        str(_error(json.dumps({"generation": 1, "servers": [], "extra": 1})))
        == "a.json: extra: unknown key (check the spelling)"
    )


def test_duplicate_port_and_name_point_at_the_second_server() -> None:
    doc = json.loads(_doc())
    doc["servers"].append(dict(doc["servers"][0], name="other"))
    assert str(_error(json.dumps(doc))) == "a.json: servers[1].port: duplicate port 8101 (also servers[0])"
    doc["servers"][1].update(name="resnet50-a-0", port=8102)
    assert _error(json.dumps(doc)).field == "servers[1].name"


def test_not_json_and_not_an_object() -> None:
    assert _error("{").field == "line 1"
    assert "expected a JSON object" in _error("[]").message


def test_model_yaml_is_validated(tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text("inputs:\n- {name: x, shape: [3], datatype: FP33}\noutputs: []\n")
    with pytest.raises(InputError) as info:
        load_model_config(tmp_path)
    assert info.value.source == str(tmp_path / "model.yaml")
    assert info.value.field == "inputs[0].datatype"


def test_model_yaml_duplicate_tensor_names(tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text(
        "inputs:\n- {name: x, shape: [3], datatype: FP32}\n- {name: x, shape: [3], datatype: FP32}\n"
        "outputs:\n- {name: y, shape: [1], datatype: FP32}\n"
    )
    with pytest.raises(InputError, match=r"inputs\[1\]\.name: duplicate tensor name 'x'"):
        load_model_config(tmp_path)


def test_model_dir_check_names_the_server(tmp_path: Path, cnn_dir: Path) -> None:
    doc = json.loads(_doc(model_dir=str(cnn_dir)))
    doc["servers"].append(dict(doc["servers"][0], name="b", port=9, model_dir=str(tmp_path)))
    assignment = parse_assignment(json.dumps(doc), "a.json")
    with pytest.raises(InputError) as info:
        check_model_dirs(assignment, "a.json")
    assert info.value.field == "servers[1].model_dir"
    assert "model.pt does not exist" in info.value.message


def test_model_yaml_duplicate_keys_name_the_line(tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text(
        "inputs:\n- {name: x, shape: [3], datatype: FP32}\noutputs:\n- {name: y, shape: [1], datatype: FP32}\n"
        "inputs:\n- {name: z, shape: [3], datatype: FP32}\n"
    )
    with pytest.raises(InputError) as info:
        load_model_config(tmp_path)
    assert str(info.value) == f"{tmp_path / 'model.yaml'}: line 5: duplicate key 'inputs' (first on line 1)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": [{"b": 1}, {"b": 2, "c": [0, {"d": 1,\n "d": 2}]}]}', "a.json: a[1].c[1].d: duplicate key on line 2"),
        ('{"servers": [], "x": {"servers": 1}, "servers": [1]}', "a.json: servers: duplicate key on line 1"),
        ('{"k\\"ey": 1, "k\\"ey": 2}', 'a.json: k"ey: duplicate key on line 1'),
    ],
)
def test_duplicate_json_keys_are_named_by_path_and_line(text: str, expected: str) -> None:
    from agents.strictjson import loads

    with pytest.raises(InputError) as info:
        loads(text, "a.json")
    assert str(info.value).startswith(expected)


def test_strict_json_keeps_syntax_errors_first_and_allows_equal_keys_in_different_objects() -> None:
    from agents.strictjson import loads

    with pytest.raises(InputError, match=r"line 1: invalid JSON"):
        loads('{"a": 1 "a": 2}', "a.json")
    assert loads('[{"a": 1}, {"a": 2}, {"b": {"a": 3}}]', "a.json") == [{"a": 1}, {"a": 2}, {"b": {"a": 3}}]
    assert loads("[" * 32 + "]" * 32, "a.json") is not None
    with pytest.raises(InputError, match="nested deeper than 32"):
        loads("[" * 33 + "]" * 33, "a.json")
