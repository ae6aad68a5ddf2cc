"""deploy/k8s's manifests as data, and the validators they must pass offline.

Kubernetes' own kinds are checked by kubernetes-validate (the API's JSON schemas, shipped in its
wheel) in strict mode, against the oldest Kubernetes the README promises and the newest the
pinned validator knows. The operators' kinds are checked against the CRD schemas vendored in
deploy/k8s/schemas/. Both reject unknown fields, as the API server does under kubectl's default
`--validate=strict`. A document of a kind neither knows is an error, never a silent pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
DEPLOY_DIR = REPO_ROOT / "deploy" / "k8s"
SCHEMA_DIR = DEPLOY_DIR / "schemas"
# The oldest Kubernetes the manifests claim (podFailurePolicy is GA in 1.31), and the newest the
# pinned kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.31", "1.37")

Document = dict[str, Any]


def manifest_files() -> list[Path]:
    return sorted(DEPLOY_DIR.glob("*.yaml"))


def load(path: Path) -> list[Document]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def only(documents: list[Document], kind: str) -> Document:
    """The one document of `kind` (an assertion error names what was there instead)."""
    found = [doc for doc in documents if doc.get("kind") == kind]
    kinds = [doc.get("kind") for doc in documents]
    assert len(found) == 1, f"expected one {kind}, found kinds {kinds}"
    return found[0]


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the vendored JSON Schema for it."""
    schemas = {}
    for path in sorted(SCHEMA_DIR.rglob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        properties = schema["properties"]
        schemas[(properties["apiVersion"]["const"], properties["kind"]["const"])] = schema
    return schemas


def where(error: jsonschema.ValidationError) -> str:
    return ".".join(str(part) for part in error.absolute_path) or "(top level)"


def crd_errors(document: Document, schema: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{where(error)}: {error.message}" for error in validator.iter_errors(document)]


def kubernetes_errors(document: Document, version: str) -> list[str]:
    try:
        kubernetes_validate.validate(document, version, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"Kubernetes {version}: {where(error)}: {error.message}"]
    except kubernetes_validate.SchemaNotFoundError as error:
        return [f"Kubernetes {version}: {error.message}"]
    return []


def validation_errors(document: Document) -> list[str]:
    """Every complaint the validators have about one document; empty when it is valid."""
    key = (document.get("apiVersion", ""), document.get("kind", ""))
    schema = crd_schemas().get(key)
    if schema is not None:
        return crd_errors(document, schema)
    return [
        error for version in KUBERNETES_VERSIONS for error in kubernetes_errors(document, version)
    ]


def all_documents() -> Iterator[tuple[Path, Document]]:
    for path in manifest_files():
        for document in load(path):
            yield path, document
