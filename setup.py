"""The package list, found (not kept by hand: a wheel once shipped without ios_core.passes), and the
compiled IOS DP core (ios_core/schedule/_dpcore.cpp); everything else is in pyproject.toml.

plugins/ is installed as the import package ``harness_plugins`` and conf/ as ``harness_conf``
(``package-dir`` in pyproject.toml); Hydra finds launchers only in its ``hydra_plugins`` namespace,
which has no ``__init__.py``.

The extension is optional: without a C++17 compiler the install still succeeds and the
search runs on the pure-Python reference core (``python -m harness --list-backends`` says
which core is in use).
"""

from setuptools import find_namespace_packages, find_packages, setup

PACKAGES = [*find_packages(include=["ios_core", "ios_core.*", "harness", "harness.*"]),
            "harness_plugins", *(f"harness_plugins.{p}" for p in find_packages("plugins")),
            "harness_conf", *find_namespace_packages(include=["hydra_plugins.*"])]

try:
    from pybind11.setup_helpers import Pybind11Extension
except ImportError:  # a build without pybind11 (e.g. --no-build-isolation on a bare machine)
    ext_modules = []
else:
    ext_modules = [Pybind11Extension("ios_core.schedule._dpcore", ["ios_core/schedule/_dpcore.cpp"], cxx_std=17,
                                     extra_compile_args=["-O2"], optional=True)]

setup(packages=PACKAGES, ext_modules=ext_modules)
