"""Reference implementations: independent runtimes the kit can be run against."""

__all__: list[str] = []
