"""Metrics of a run: what copy tasks measure (``measurement``, executor side, standard library only), the
Prometheus collector that keeps MM2's metric names and windows (``registry``, ``sampled_stat``) and the HTTP
endpoint (``server``), both driver side. This face imports nothing, so an executor that imports
``mm2py.metrics.measurement`` loads neither the Prometheus client nor an HTTP server.
"""
