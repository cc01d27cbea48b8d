"""Build hook for the optional C accelerators; everything else is in pyproject.toml.

``millrace.record._speedups`` speeds up record encoding and decoding;
``millrace.client.producer._internals._speedups`` the producer's per-record append (it
uses the record encoder through a capsule, so it needs the first).  Both are optional: a
machine without a C compiler still installs millrace and runs the pure-Python code
(``MILLRACE_NO_SPEEDUPS=1`` forces that at run time too).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "millrace.record._speedups",
            sources=["millrace/record/_speedups.c"],
            depends=["millrace/record/millrace_record_capi.h"],
            optional=True,
        ),
        Extension(
            "millrace.client.producer._internals._speedups",
            sources=["millrace/client/producer/_internals/_speedups.c"],
            include_dirs=["millrace/record"],
            depends=["millrace/record/millrace_record_capi.h",
                     "millrace/client/producer/_internals/_speedups_lock.h",
                     "millrace/client/producer/_internals/_speedups_send.h"],
            optional=True,
        ),
    ],
)
