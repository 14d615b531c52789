"""Deprecated location of the adapter protocol: use ``conformance.adapters``
(or ``from conformance import Adapter``). Kept for one release."""

import warnings

from .adapters.adapter import Adapter, EffectRecorder, error_response, result_response

__all__ = ["Adapter", "EffectRecorder", "error_response", "result_response"]

warnings.warn(
    "conformance.adapter moved to conformance.adapters.adapter; import Adapter from conformance",
    DeprecationWarning,
    stacklevel=2,
)
