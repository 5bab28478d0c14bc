"""mm2py's tests, and the real-broker harness (``tests.kafka_harness``) that ``examples/demo.py`` and
``bench/`` reuse when run as modules from the repository root (``python -m examples.demo``).

Inside the test tree, modules import their helpers by bare name (``kafka_harness``, ``mm2py_cli``): pytest
puts each test directory on ``sys.path``, and tests/conftest.py puts this one there.
"""
