"""mm2py's tests, and the real-broker harness (``tests.harness``) that ``examples/demo.py`` and
``bench/`` reuse when run as modules from the repository root (``python -m examples.demo``, ``python -m
bench.run_bench``): the repository root is then on ``sys.path``, as it is under pytest (tests/ is a package).
"""
