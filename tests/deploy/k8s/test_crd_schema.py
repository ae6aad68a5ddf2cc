"""The CRD -> JSON Schema conversion that made deploy/k8s/schemas/."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from . import crd_schema
from .crd_schema import CrdError, strict_schema, version_schemas


def crd(schema: dict, versions: tuple[tuple[str, bool], ...] = (("v1", True),)) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget"},
            "versions": [
                {"name": name, "served": served, "schema": {"openAPIV3Schema": schema}}
                for name, served in versions
            ],
        },
    }


WIDGET = {
    "type": "object",
    "description": "dropped",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "size": {"type": "integer", "nullable": True},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "items": {"type": "array", "items": {"properties": {"a": {"type": "string"}}}},
            },
        }
    },
}


def validator() -> jsonschema.Draft202012Validator:
    schema = version_schemas(crd(WIDGET))["example.com/widget_v1.json"]
    return jsonschema.Draft202012Validator(schema)


def widget(spec: dict) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "spec": spec}


def test_unknown_fields_are_rejected_at_every_depth() -> None:
    assert validator().is_valid(widget({"size": 1, "items": [{"a": "x"}]}))
    assert not validator().is_valid(widget({"sise": 1}))
    assert not validator().is_valid(widget({"items": [{"b": "x"}]}))
    assert not validator().is_valid({**widget({}), "extra": 1})


def test_what_kubernetes_keeps_open_stays_open() -> None:
    assert validator().is_valid(widget({"extra": {"anything": [1]}, "labels": {"k": "v"}}))
    assert not validator().is_valid(widget({"labels": {"k": 1}}))


def test_nullable_admits_null_and_descriptions_are_dropped() -> None:
    assert validator().is_valid(widget({"size": None}))
    assert "description" not in json.dumps(version_schemas(crd(WIDGET)))


def test_api_version_and_kind_are_pinned() -> None:
    assert not validator().is_valid({**widget({}), "apiVersion": "example.com/v2"})
    assert not validator().is_valid({**widget({}), "kind": "Gadget"})
    assert not validator().is_valid({"spec": {}})


def test_only_served_versions_are_written() -> None:
    schemas = version_schemas(crd(WIDGET, (("v1", True), ("v0", False))))
    assert list(schemas) == ["example.com/widget_v1.json"]
    with pytest.raises(CrdError, match="no served version"):
        version_schemas(crd(WIDGET, (("v0", False),)))


def test_input_that_is_not_a_crd_is_named() -> None:
    with pytest.raises(CrdError, match="got kind 'Deployment'"):
        version_schemas({"kind": "Deployment"})


def test_the_command_writes_one_file_per_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "crd.yaml"
    source.write_text(yaml.safe_dump_all([{"kind": "Namespace"}, crd(WIDGET)]))
    assert crd_schema.main([str(source), str(tmp_path / "out")]) == 0
    written = tmp_path / "out" / "example.com" / "widget_v1.json"
    assert json.loads(written.read_text())["title"] == "Widget example.com/v1"
    assert capsys.readouterr().out.strip() == str(written)


def test_the_command_names_a_file_without_a_crd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "crd.yaml"
    source.write_text("kind: Namespace\n")
    assert crd_schema.main([str(source), str(tmp_path)]) == 1
    assert "no CustomResourceDefinition in it" in capsys.readouterr().err


def test_strict_schema_leaves_the_input_alone() -> None:
    node = {"properties": {"a": {"type": "string", "description": "d"}}}
    strict_schema(node)
    assert node == {"properties": {"a": {"type": "string", "description": "d"}}}
