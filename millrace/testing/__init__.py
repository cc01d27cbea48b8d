"""Real processes for tests, benchmarks and the demo (a broker as a child process).

Only the top layers (``millrace.demo``, ``millrace.cli``) and tests import this package.
"""
