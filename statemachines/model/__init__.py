"""The executable model: a loaded spec compiled into operation steps
(``compiler``, built on ``compile_steps`` and ``compile_context``;
``steps``), interpreted over an indexed record store (``model``, ``store``),
its predictions judged against observations (``matchers``). Imports
``errors``, ``language`` and ``load``."""

__all__: list[str] = []
