"""The deploy checks run with `make test-unit`, so they see the machine as the unit tests do."""

from tests.unit.conftest import machine_free

__all__ = ["machine_free"]
