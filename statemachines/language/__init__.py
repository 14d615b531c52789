"""The expression language: CEL expressions compiled once (``expressions``),
the subset of CEL compiled to Python closures (``cel_subset``) and the CEL
binding itself (``cel_import``). Imports only ``statemachines.errors``."""

__all__: list[str] = []
