"""A client's keys read once, when the file is loaded: MM2's Java keys (and librdkafka's spellings of them) into
the typed :class:`~mm2py.client_settings.ClientSettings` both client stacks connect with.

``client_settings_reader`` is the entry (protocol, bootstrap servers, timeouts and sizes, and what the keys say
about connecting), recording as it reads in a ``key_reading``; ``login`` reads a SASL login (``jaas`` parses
``sasl.jaas.config``); ``tls`` reads TLS material and checks (``keystores``: Java key and trust stores as PEM;
``cipher_names``: Java's cipher names as OpenSSL's; ``tls_versions``: version pins).

May import: ``mm2py.client_settings``, ``mm2py.secrets`` and ``mm2py.librdkafka`` (its key tables, whether its build
has Kerberos, and the rendering of its properties from the typed settings).
"""
