"""Turn a CustomResourceDefinition's openAPIV3Schema into a strict JSON Schema file.

The vendored schemas in deploy/k8s/schemas/ were made with this module, from the operators'
released CRD files (the README there names each source and commit):

    python -m tests.deploy.k8s.crd_schema CRD.yaml deploy/k8s/schemas

A CRD's structural schema is already JSON Schema except for a few OpenAPI and Kubernetes
extensions, handled here the way the API server reads them:
- unknown fields: the API server rejects them (kubectl's default `--validate=strict`), so every
  object that lists its properties gets `additionalProperties: false`, unless it is marked
  `x-kubernetes-preserve-unknown-fields`;
- `nullable: true` admits null;
- `apiVersion` and `kind` are pinned to the CRD's own, so a document can only pass the schema of
  its own kind and version.
Descriptions are dropped (they are most of the size); `x-kubernetes-validations` (CEL rules) are
kept for the reader but not evaluated by JSON Schema validators.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DROPPED_KEYS = frozenset({"description"})
# Keywords whose value is one schema, or a list / a map of schemas.
ONE_SCHEMA = ("items", "additionalProperties", "not")
SCHEMA_LISTS = ("anyOf", "allOf", "oneOf")
SCHEMA_MAPS = ("properties",)


class CrdError(ValueError):
    """The input is not a CustomResourceDefinition this module can convert."""


def strict_schema(node: dict[str, Any]) -> dict[str, Any]:
    """One OpenAPI schema node as strict JSON Schema (recursively)."""
    converted: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROPPED_KEYS:
            continue
        if key in ONE_SCHEMA and isinstance(value, dict):
            converted[key] = strict_schema(value)
        elif key in SCHEMA_LISTS:
            converted[key] = [strict_schema(item) for item in value]
        elif key in SCHEMA_MAPS:
            converted[key] = {name: strict_schema(item) for name, item in value.items()}
        elif key == "nullable":
            continue  # folded into "type" below
        else:
            converted[key] = value
    if node.get("nullable") and "type" in converted:
        converted["type"] = [converted["type"], "null"]
    keeps_unknown = node.get("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in node and "additionalProperties" not in node and not keeps_unknown:
        converted["additionalProperties"] = False
    return converted


def version_schemas(crd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{"<group>/<kind>_<version>.json": schema} for every served version of the CRD.

    The file names follow the convention kubeconform and other validators look up.
    """
    if crd.get("kind") != "CustomResourceDefinition":
        raise CrdError(f"expected a CustomResourceDefinition, got kind {crd.get('kind')!r}")
    spec = crd["spec"]
    group, kind = spec["group"], spec["names"]["kind"]
    schemas = {}
    for version in spec["versions"]:
        if not version.get("served", False):
            continue
        schema = strict_schema(version["schema"]["openAPIV3Schema"])
        properties = schema.setdefault("properties", {})
        properties["apiVersion"] = {"const": f"{group}/{version['name']}"}
        properties["kind"] = {"const": kind}
        schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind"})
        schema = {"$schema": DRAFT, "title": f"{kind} {group}/{version['name']}", **schema}
        schemas[f"{group}/{kind.lower()}_{version['name']}.json"] = schema
    if not schemas:
        raise CrdError(f"{kind}: no served version in the CRD")
    return schemas


def crds_in(path: Path) -> list[dict[str, Any]]:
    documents = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    crds = [doc for doc in documents if doc.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise CrdError(f"{path}: no CustomResourceDefinition in it")
    return crds


def write_schemas(crd_file: Path, out_dir: Path) -> list[Path]:
    written = []
    for crd in crds_in(crd_file):
        for name, schema in version_schemas(crd).items():
            target = out_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            # One key per line: reviewable diffs when a new operator release is vendored.
            target.write_text(json.dumps(schema, indent=1) + "\n", encoding="utf-8")
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("crd_files", nargs="+", type=Path, help="CRD YAML files")
    parser.add_argument("out_dir", type=Path, help="where <group>/<kind>_<version>.json go")
    args = parser.parse_args(argv)
    try:
        for crd_file in args.crd_files:
            for path in write_schemas(crd_file, args.out_dir):
                print(path)
    except (OSError, CrdError, KeyError, yaml.YAMLError) as exc:
        print(f"crd_schema: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
