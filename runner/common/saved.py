"""One way to save the run's typed values: pydantic writes a value (a dataclass or a model) as JSON-ready data and
reads it back validated, nested values included (a fold task's member, a machine's GPUs, a spec's column splits).
Nothing is serialised by hand."""
from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import TypeAdapter


@cache
def _adapter(cls: type) -> TypeAdapter:
    # imported here, where a value is first written or read: a measuring process defines saved types and writes
    # them as plain dataclasses, and never pays for pydantic's import
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


class Saved:
    """Mixed into every value the run writes to JSON (`plan.json`, `report.json`, task and manifest files)."""

    def to_json(self) -> dict[str, Any]:
        # anything pydantic has no JSON form for is written as its text, as `runner.common.atomic.write_json` does
        return _adapter(type(self)).dump_python(self, mode="json", fallback=str)

    @classmethod
    def from_json(cls, data: dict[str, Any]):
        return _adapter(cls).validate_python(data)
