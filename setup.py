"""Build hook for the optional C accelerator; everything else is in pyproject.toml.

``millrace.record._speedups`` speeds up record encoding and decoding.  It is optional: a
machine without a C compiler still installs millrace and runs the pure-Python codec
(``MILLRACE_NO_SPEEDUPS=1`` forces that at run time too).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "millrace.record._speedups",
            sources=["millrace/record/_speedups.c"],
            optional=True,
        )
    ],
)
