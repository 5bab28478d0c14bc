"""GET a path of mm2py's metrics port as a probe does: the status and the body, or 0 while nothing listens."""

from __future__ import annotations

import urllib.error
import urllib.request


def probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:  # the endpoint is not up yet
        return 0, str(exc)
