"""Whether the installed librdkafka can log in with Kerberos (GSSAPI), and why not when it cannot.

Why apart: both copy paths need librdkafka for a Kerberos cluster (the driver makes every admin call with it), so
reading a GSSAPI client's keys asks here, and refuses the configuration when the build lacks it.
"""

from __future__ import annotations

import functools


@functools.cache
def gssapi_available() -> bool:
    """Whether the installed librdkafka was built with Kerberos (the PyPI wheels are not)."""
    try:
        import confluent_kafka

        confluent_kafka.Producer({"builtin.features": "sasl_gssapi", "log_level": 0})
    except ImportError:  # cannot tell; the client itself will say so
        return True
    except Exception:
        return False
    return True


NO_GSSAPI_INSTEAD = (
    "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, or confluent-kafka built on a librdkafka with GSSAPI"
)


def no_gssapi_reason() -> str:
    """Why a Kerberos login cannot go ahead here: one reason for both copy paths, since both need librdkafka.

    The PyPI wheels of confluent-kafka bundle a librdkafka built without cyrus-sasl, so it has no GSSAPI, and the
    driver makes every admin call (topics, offsets, groups) with it whichever path copies the records.
    """
    try:
        import confluent_kafka

        build = f"librdkafka {confluent_kafka.libversion()[0]}"
    except ImportError:
        build = "the installed librdkafka"
    return (
        f"GSSAPI (Kerberos; Java's default when unset), but {build} was built without it (no cyrus-sasl), "
        "and mm2py's admin calls use librdkafka on either copy path"
    )
