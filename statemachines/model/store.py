"""Entity storage for the model: records by key, grouped by scope, with unique
indexes, so an operation touches only its own records whatever the total."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["EntityStore"]


class EntityStore:
    def __init__(self, key: str, scope_field: str | None, unique_fields: tuple[str, ...]):
        self.key, self.scope_field, self.unique_fields = key, scope_field, unique_fields
        self.records: dict = {}
        self.by_scope: dict = {}
        self.unique: dict[str, dict] = {f: {} for f in unique_fields}

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key) -> dict | None:
        return self.records.get(key)

    def find_by(self, field: str, value) -> dict | None:
        if field == self.key:
            return self.records.get(value)
        key = self.unique[field].get(value)
        return None if key is None else self.records.get(key)

    def add(self, record: dict) -> None:
        key = record[self.key]
        self.records[key] = record
        if self.scope_field:
            self.by_scope.setdefault(record[self.scope_field], {})[key] = None
        for f in self.unique_fields:
            self.unique[f][record[f]] = key

    def remove(self, key) -> None:
        record = self.records.pop(key)
        if self.scope_field:
            group = self.by_scope.get(record[self.scope_field])
            if group is not None:
                group.pop(key, None)
                if not group:
                    del self.by_scope[record[self.scope_field]]
        for f in self.unique_fields:
            if self.unique[f].get(record[f]) == key:
                del self.unique[f][record[f]]

    def update(self, record: dict, field: str, value) -> None:
        """Set a field, keeping indexes right when an indexed field changes."""
        if field in self.unique:
            old = record.get(field)
            if self.unique[field].get(old) == record[self.key]:
                del self.unique[field][old]
            self.unique[field][value] = record[self.key]
        record[field] = value

    def in_scope(self, scope_value) -> Iterator[dict]:
        for key in list(self.by_scope.get(scope_value, ())):
            record = self.records.get(key)
            if record is not None:
                yield record

    def all(self) -> Iterator[dict]:
        yield from list(self.records.values())

    def clear(self) -> None:
        self.records.clear()
        self.by_scope.clear()
        for index in self.unique.values():
            index.clear()

    def copy(self) -> EntityStore:
        other = EntityStore(self.key, self.scope_field, self.unique_fields)
        other.records = {k: dict(r) for k, r in self.records.items()}
        other.by_scope = {s: dict(g) for s, g in self.by_scope.items()}
        other.unique = {f: dict(i) for f, i in self.unique.items()}
        return other
