"""A spec file run many times in one process is loaded once, and loaded again
as soon as it or a fragment it includes changes (conformance/engine/loaded_specs.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conformance.engine.loaded_specs import forget_loaded_specs, load_spec_once
from conformance.specs import resolve_spec


@pytest.fixture
def spec_copy(tmp_path):
    """async-command and the fragment it includes, copied where a test may edit them."""
    source = Path(resolve_spec("async-command"))
    for name in ("async-command.yaml", "async-command.scenarios.yaml"):
        shutil.copy(source.parent / name, tmp_path / name)
    forget_loaded_specs()
    yield tmp_path / "async-command.yaml"
    forget_loaded_specs()


def _edit(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` (the same size) at once: the file's clock may not tick."""
    assert len(old) == len(new)
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_an_unchanged_spec_is_loaded_once(spec_copy):
    assert load_spec_once(spec_copy) is load_spec_once(str(spec_copy))


def test_an_edit_of_the_same_size_loads_it_again(spec_copy):
    first = load_spec_once(spec_copy)
    _edit(spec_copy, "title: Async CLI", "title: Async cli")
    again = load_spec_once(spec_copy)
    assert (first.title, again.title) == (
        "Async CLI commands and their job descriptors",
        "Async cli commands and their job descriptors",
    )


def test_an_edited_fragment_loads_it_again(spec_copy):
    first = load_spec_once(spec_copy)
    _edit(
        spec_copy.parent / "async-command.scenarios.yaml",
        "title: The async command declares",
        "title: The async command DECLARES",
    )
    again = load_spec_once(spec_copy)
    titles = lambda spec: next(s.title for s in spec.scenarios if s.id == "N1")  # noqa: E731  # a one-line accessor
    assert (titles(first), titles(again)) == ("The async command declares itself", "The async command DECLARES itself")


def test_a_fragment_gone_is_reported_as_when_loading_it_first(spec_copy):
    from statemachines import SpecError

    load_spec_once(spec_copy)
    (spec_copy.parent / "async-command.scenarios.yaml").unlink()
    with pytest.raises(SpecError, match="async-command.scenarios.yaml"):
        load_spec_once(spec_copy)
