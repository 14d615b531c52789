"""A reference command-line tool with an async command (seed 001's job
descriptor contract, spec/async-command.yaml): ``.venv/bin/python -m
lifecycle_references.async_cli`` (the interpreter of the environment the kit
is installed in). Standard library only, so that it starts
fast; the kit drives it through the command adapter with the bundled
``adapter.yaml``."""

from .main import main
from .tool import AsyncCli

__all__ = ["AsyncCli", "main"]
