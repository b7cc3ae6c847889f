"""The compiled IOS DP core (ios_core/schedule/_dpcore.cpp); everything else is in pyproject.toml.

The extension is optional: without a C++17 compiler the install still succeeds and the
search runs on the pure-Python reference core (``python -m harness --list-backends`` says
which core is in use).
"""

from setuptools import setup

try:
    from pybind11.setup_helpers import Pybind11Extension
except ImportError:  # a build without pybind11 (e.g. --no-build-isolation on a bare machine)
    ext_modules = []
else:
    ext_modules = [Pybind11Extension("ios_core.schedule._dpcore", ["ios_core/schedule/_dpcore.cpp"], cxx_std=17,
                                     extra_compile_args=["-O2"], optional=True)]

setup(ext_modules=ext_modules)
