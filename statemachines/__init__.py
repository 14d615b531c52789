"""Spec -> executable model. Loads and validates lifecycle specs (YAML) and
compiles them into reference models built on ``transitions``.

This package never imports Hypothesis or pytest.
"""

from .compiler import compile_spec, load_replay_file, load_spec, load_spec_data
from .errors import ExpressionError, ObservationError, Problem, SpecError, StatemachinesError
from .expressions import compile_expression, fill, text_of_size
from .limits import EDGE_CLASSES, LimitEdges, exploration_applies, limit_edges
from .matchers import Difference, Matcher, first_difference, to_jsonable, use_file_reader
from .model import Coverage, Model, Prediction
from .params import resolve_parameters
from .races import derived_races, record_writers
from .scenario import AdvanceStep, CallStep, ConcurrentStep, RepeatStep, render
from .spec import Scenario, Spec

__all__ = [
    "use_file_reader",
    "EDGE_CLASSES",
    "LimitEdges",
    "derived_races",
    "exploration_applies",
    "limit_edges",
    "record_writers",
    "AdvanceStep",
    "CallStep",
    "ConcurrentStep",
    "Coverage",
    "Difference",
    "ExpressionError",
    "Matcher",
    "Model",
    "ObservationError",
    "Prediction",
    "Problem",
    "RepeatStep",
    "Scenario",
    "Spec",
    "SpecError",
    "StatemachinesError",
    "compile_expression",
    "compile_spec",
    "fill",
    "first_difference",
    "load_replay_file",
    "load_spec",
    "load_spec_data",
    "render",
    "resolve_parameters",
    "text_of_size",
    "to_jsonable",
]
