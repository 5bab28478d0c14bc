"""``make bench``: mm2py run --once against a tuned one-process consume->produce loop.

See docs/performance.md.
"""
