"""Spec -> executable model. Loads and validates lifecycle specs (YAML) and
compiles them into reference models built on ``transitions``.

This package never imports Hypothesis or pytest.
"""

from .errors import ExpressionError, ObservationError, Problem, RunCostError, SpecError, StatemachinesError
from .language.expressions import compile_expression, fill, text_of_size
from .load.params import resolve_parameters
from .load.scenario import AdvanceStep, CallStep, ConcurrentStep, RepeatStep, render
from .load.spec import Scenario, Spec
from .model.compiler import compile_spec, load_replay_file, load_scenario_file, load_spec, load_spec_data
from .model.matchers import Difference, Matcher, first_difference, to_jsonable, use_file_reader
from .model.model import Coverage, Model, Prediction
from .tools.limits import EDGE_CLASSES, LimitEdges, exploration_applies, limit_edges
from .tools.naming import file_name_arguments, naming_arguments
from .tools.races import derived_races, record_writers

__all__ = [
    "use_file_reader",
    "EDGE_CLASSES",
    "LimitEdges",
    "derived_races",
    "exploration_applies",
    "limit_edges",
    "naming_arguments",
    "file_name_arguments",
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
    "RunCostError",
    "SpecError",
    "StatemachinesError",
    "compile_expression",
    "compile_spec",
    "fill",
    "first_difference",
    "load_replay_file",
    "load_scenario_file",
    "load_spec",
    "load_spec_data",
    "render",
    "resolve_parameters",
    "text_of_size",
    "to_jsonable",
]
