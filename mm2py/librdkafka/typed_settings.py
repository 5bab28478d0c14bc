"""A client's translated settings read once into the typed, library-neutral :class:`ClientSettings`.

Why here: :mod:`mm2py.librdkafka.settings` is where MM2's Java client keys are read (JAAS login modules, Java key
stores, TLS details, librdkafka's own keys that users may write instead); what it makes of them about connecting is
taken from its result, with the same names and the same precedence, so a client built from the typed object
connects exactly as one built from the librdkafka settings. Nothing here refuses: a value that cannot be used
becomes a :class:`SettingProblem` naming the key, and each client stack decides what it can honour.
"""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.client_settings import (
    AwsMskIamLogin,
    ClientSettings,
    KerberosLogin,
    Login,
    OidcLogin,
    PasswordLogin,
    SettingProblem,
    TlsSettings,
    UnsecuredTokenLogin,
)
from mm2py.librdkafka.jaas import AWS_PROFILE_SETTING
from mm2py.librdkafka.tls_versions import PIN_KEY
from mm2py.secrets import mask_value

# The librdkafka keys about connecting that ClientSettings carries; any other ssl./sasl. key is reported in
# other_security_keys (it would change how a client connects).
_CARRIED = frozenset(
    {
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.method",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.extensions",
        "sasl.oauthbearer.config",
        "enable.sasl.oauthbearer.unsecure.jwt",
        "sasl.kerberos.principal",
        "sasl.kerberos.keytab",
        "sasl.kerberos.service.name",
        AWS_PROFILE_SETTING,
        "ssl.ca.location",
        "ssl.ca.pem",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "ssl.certificate.pem",
        "ssl.key.pem",
        "ssl.cipher.suites",
        "ssl.crl.location",
        "enable.ssl.certificate.verification",
    }
)
_SECURITY_PREFIXES = ("ssl.", "sasl.", "enable.ssl.", "enable.sasl.", "ssl_")
_MILLISECONDS = {
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "socket_connection_setup_timeout_ms": "socket.connection.setup.timeout.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
}
# Tuning only: the first key set to a whole number wins (a Java key's librdkafka alias second), else None.
_TUNING = {
    "retry_backoff_ms": ("retry.backoff.ms",),
    "retry_backoff_max_ms": ("retry.backoff.max.ms",),
    "ack_timeout_ms": ("request.timeout.ms",),
    "delivery_timeout_ms": ("delivery.timeout.ms", "message.timeout.ms"),
    "linger_ms": ("linger.ms", "queue.buffering.max.ms"),
    "batch_size": ("batch.size",),
    "message_max_bytes": ("message.max.bytes",),
}
_OIDC_KEYS = ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret")


def typed_settings(settings: Mapping[str, str]) -> ClientSettings:
    """The :class:`ClientSettings` of a client configured by the librdkafka ``settings`` mm2py translated."""
    return _Reading(settings).result()


class _Reading:
    def __init__(self, settings: Mapping[str, str]) -> None:
        self.settings = {key: str(value) for key, value in settings.items()}
        self.problems: list[SettingProblem] = []

    def problem(self, key: str, reason: str, allowed: str | None = None) -> None:
        self.problems.append(SettingProblem(key, mask_value(key, self.settings.get(key, "")), reason, allowed))

    def milliseconds(self, key: str) -> int | None:
        value = self.settings.get(key)
        if value is None:
            return None
        if not value.strip().isdigit():
            self.problem(key, "not a whole number of milliseconds")
            return None
        return int(value)

    def tuning(self, keys: tuple[str, ...]) -> int | None:
        return next((int(v) for v in (self.settings.get(k, "").strip() for k in keys) if v.isdigit()), None)

    def result(self) -> ClientSettings:
        get = self.settings.get
        servers = tuple(s.strip() for s in get("bootstrap.servers", "").split(",") if s.strip())
        if not servers:
            self.problem("bootstrap.servers", "no bootstrap servers")
        protocol = get("security.protocol", "PLAINTEXT").upper()
        # librdkafka's socket.timeout.ms is what the Java consumer and admin call request.timeout.ms.
        timeout_key = "socket.timeout.ms" if "socket.timeout.ms" in self.settings else "request.timeout.ms"
        mechanism = self.mechanism() if protocol.startswith("SASL_") else None
        return ClientSettings(
            bootstrap_servers=servers,
            security_protocol=protocol,
            client_id=get("client.id"),
            request_timeout_ms=self.milliseconds(timeout_key),
            **{name: self.milliseconds(key) for name, key in _MILLISECONDS.items()},
            client_dns_lookup=get("client.dns.lookup"),
            **{name: self.tuning(keys) for name, keys in _TUNING.items()},
            isolation_level=get("isolation.level"),
            sasl_mechanism=mechanism,
            login=self.login(mechanism) if mechanism else None,
            tls=self.tls() if protocol.endswith("SSL") else None,
            other_security_keys=tuple(
                (key, mask_value(key, value))
                for key, value in self.settings.items()
                if key.startswith(_SECURITY_PREFIXES) and key not in _CARRIED
            ),
            problems=tuple(self.problems),
        )

    def mechanism(self) -> str:
        key = "sasl.mechanisms" if "sasl.mechanisms" in self.settings else "sasl.mechanism"
        return self.settings.get(key, "GSSAPI")  # Java's default, and librdkafka's

    def login(self, mechanism: str) -> Login | None:
        get = self.settings.get
        if mechanism == "GSSAPI":
            return KerberosLogin(
                get("sasl.kerberos.principal"), get("sasl.kerberos.keytab"), get("sasl.kerberos.service.name", "kafka")
            )
        if mechanism == "AWS_MSK_IAM":
            return AwsMskIamLogin(get(AWS_PROFILE_SETTING) or None)
        if mechanism != "OAUTHBEARER":
            if "sasl.username" not in self.settings or "sasl.password" not in self.settings:
                self.problem("sasl.username", f"{mechanism} needs sasl.username and sasl.password")
                return None
            return PasswordLogin(mechanism, self.settings["sasl.username"], self.settings["sasl.password"])
        extensions = tuple(
            (name, value)
            for name, sep, value in (item.partition("=") for item in get("sasl.oauthbearer.extensions", "").split(","))
            if sep
        )
        if get("sasl.oauthbearer.method", "default").lower() == "oidc":
            missing = [key for key in _OIDC_KEYS if not get(key)]
            if missing:
                self.problem(missing[0], "OIDC login needs a token endpoint, client id and client secret")
                return None
            return OidcLogin(
                self.settings["sasl.oauthbearer.token.endpoint.url"],
                self.settings["sasl.oauthbearer.client.id"],
                self.settings["sasl.oauthbearer.client.secret"],
                get("sasl.oauthbearer.scope", ""),
                extensions,
            )
        if get("enable.sasl.oauthbearer.unsecure.jwt", "false").lower() == "true":
            return self.unsecured()
        self.problem(
            "sasl.oauthbearer.method",
            "OAUTHBEARER needs sasl.oauthbearer.method=oidc or enable.sasl.oauthbearer.unsecure.jwt=true",
        )
        return None

    def unsecured(self) -> UnsecuredTokenLogin | None:
        config = self.settings.get("sasl.oauthbearer.config", "")
        options = dict(item.split("=", 1) for item in config.split() if "=" in item)
        if not options.get("principal"):
            self.problem("sasl.oauthbearer.config", "an unsecured token needs principal=NAME")
            return None
        life = options.get("lifeSeconds", "3600")
        if not life.isdigit():
            self.problem("sasl.oauthbearer.config", "lifeSeconds is not a whole number")
            return None
        extensions = tuple((k[len("extension_") :], v) for k, v in options.items() if k.startswith("extension_"))
        scope = tuple(s for s in options.get("scope", "").split(",") if s)
        return UnsecuredTokenLogin(options["principal"], scope, int(life), extensions)

    def tls(self) -> TlsSettings:
        get = self.settings.get
        algorithm = get("ssl.endpoint.identification.algorithm", "https").lower()
        if algorithm not in ("https", "none"):
            self.problem("ssl.endpoint.identification.algorithm", "not an algorithm librdkafka knows", "https, none")
            algorithm = "https"
        if bool(get("ssl.certificate.pem")) != bool(get("ssl.key.pem")):
            self.problem("ssl.key.pem", "an inline client key needs ssl.certificate.pem too, and the other way round")
        elif get("ssl.key.location") and not get("ssl.certificate.location") and not get("ssl.key.pem"):
            self.problem("ssl.key.location", "a client key needs ssl.certificate.location too")
        return TlsSettings(
            ca_location=get("ssl.ca.location") or None,
            ca_pem=get("ssl.ca.pem") or None,
            certificate_location=get("ssl.certificate.location") or None,
            key_location=get("ssl.key.location") or None,
            certificate_pem=get("ssl.certificate.pem") or None,
            key_pem=get("ssl.key.pem") or None,
            key_password=get("ssl.key.password") or None,
            endpoint_identification=algorithm,
            verify_certificates=get("enable.ssl.certificate.verification", "true").lower() != "false",
            cipher_suites=get("ssl.cipher.suites") or None,
            crl_location=get("ssl.crl.location") or None,
            minimum_version=get(PIN_KEY) or "TLSv1.2",
        )
