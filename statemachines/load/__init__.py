"""Loading a spec: safe YAML with a source map (``source``), ``include:``
fragments (``includes``), the spec format's schema (``schema_check``), the
typed spec (``spec``, ``scenario``) and its parameters (``params``). Imports
``statemachines.errors`` and ``statemachines.language``."""

__all__: list[str] = []
