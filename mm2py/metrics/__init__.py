"""Metrics of a run: what copy tasks measure (``measurement``, executor side, standard library only), the Prometheus
collector that keeps MM2's metric windows (``registry``, ``sampled_stat``) under MM2's two name sets (``names``,
KIP-1280), what the probes answer (``health``) and the HTTP endpoint (``server``), all driver side. This face imports
nothing, so an executor that imports ``mm2py.metrics.measurement`` loads neither the Prometheus client nor an HTTP
server.

May import: ``mm2py.executor.contract`` (the copy path a flow's metrics are labelled with); ``measurement`` only
the standard library.
"""
