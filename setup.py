"""Only the C extension lives here; everything else is in pyproject.toml.

``bench.ingest._native`` holds the ingest's C hot paths (ingest/_native.c). It is optional: without a C
compiler the install still succeeds and the pure-Python parser is used (``bench ingest`` says which).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("bench.ingest._native", ["ingest/_native.c"], optional=True, extra_compile_args=["-O2"]),
    ]
)
