# setuptools reads the metadata from pyproject.toml; this file only names
# the cffi module, which pyproject.toml cannot do.
from setuptools import setup

setup(cffi_modules=["shardq/_build.py:ffibuilder"])
