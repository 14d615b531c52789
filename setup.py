"""Packaging that pyproject.toml cannot say alone: the specs are written in
``spec/`` (the repository's place for them) and ship as the package
``lifecycle_specs``; the docs (``docs/``) ship as ``conformance.docs`` so
``conformance docs`` can print them. Both are read with importlib.resources."""

import tempfile

from setuptools import find_namespace_packages, setup

PACKAGES = find_namespace_packages(
    include=[
        "statemachines",
        "statemachines.*",
        "conformance",
        "conformance.*",
        "lifecycle_references",
        "lifecycle_references.*",
    ],
    exclude=["*.__pycache__"],
)

setup(
    packages=PACKAGES + ["lifecycle_specs", "conformance.docs"],
    package_dir={"lifecycle_specs": "spec", "conformance.docs": "docs"},
    package_data={
        "lifecycle_specs": ["*.yaml", "*.json", "*.changelog.md", "mutants/*.yaml"],
        "conformance": ["schemas/*.json", "schemas/*/*.json"],
        "conformance.docs": ["*.md"],
        "lifecycle_references.async_cli": ["*.yaml"],
    },
    include_package_data=False,
    # Each build starts from an empty build directory: a build/ left in the
    # checkout would carry modules that were moved or deleted into the wheel.
    options={"build": {"build_base": tempfile.mkdtemp(prefix="lifecycle-conformance-build-")}},
)
