"""Reaching an implementation: the protocol every implementation speaks
(``adapter``), and the transports that turn a Python object (``python``), a
program speaking JSON lines (``stdio``, ``stdio_protocol``) or a command-line
tool (``command``, ``command_config``) into that protocol.

Only ``adapter`` is imported here (standard library only), so that an
implementation's own adapter module stays light."""

from .adapter import Adapter, EffectRecorder, error_response, result_response

__all__ = ["Adapter", "EffectRecorder", "error_response", "result_response"]
