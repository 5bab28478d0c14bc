"""AWS_MSK_IAM on the batch path: kafka-python's own mechanism, with the AWS profile a cluster names.

Why a module: kafka-python signs the MSK login itself (SigV4 over ``kafka-cluster:Connect``, botocore's
credentials), but always with botocore's default session, and it keeps only the connection settings it knows,
so IAMLoginModule's ``awsProfileName`` has no way in. The one setting it hands on unchanged, whatever the
mechanism, is the OAUTHBEARER provider slot: the connection puts the cluster's :class:`AwsMskIamLogin` there,
and the mechanism registered here reads it back. The signing itself is the library's, untouched.

Runs on executors, inside the wire client's connections; imports botocore only when a connection logs in.
"""

from __future__ import annotations

import functools
from typing import Any

from kafka.net.sasl import register_sasl_mechanism  # type: ignore[import-untyped]
from kafka.net.sasl.msk import SaslMechanismAwsMskIam  # type: ignore[import-untyped]

from mm2py.client_settings import AwsMskIamLogin
from mm2py.errors import ConfigError

MECHANISM = "AWS_MSK_IAM"


class _ProfileAwsMskIam(SaslMechanismAwsMskIam):  # type: ignore[misc]
    """kafka-python's AWS_MSK_IAM login, with a botocore session for the cluster's profile when it names one."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        login = config.get("sasl_oauth_token_provider")
        if isinstance(login, AwsMskIamLogin) and login.profile:
            from botocore.session import Session  # type: ignore[import-untyped]

            self._boto_session_cls = functools.partial(Session, profile=login.profile)


def use_aws_msk_iam(alias: str, config: dict[str, Any]) -> None:
    """Make ``config`` (the wire library's settings) carry its AWS login to the mechanism, and register it."""
    login = config.pop("sasl_aws_msk_iam_login")
    check_aws_login(alias, login)
    config["sasl_oauth_token_provider"] = login
    register_sasl_mechanism(MECHANISM, _ProfileAwsMskIam, overwrite=True)


def check_aws_login(alias: str, login: AwsMskIamLogin) -> None:
    """Refuse, in one line, a login botocore finds no credentials or no region for, naming where it looked.

    Why before connecting: kafka-python finds out only inside the SASL exchange, logs it and retries until the
    bootstrap gives up with "no broker answers", which would send a user looking at the network.
    """
    from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]
    from botocore.session import Session

    where = f"AWS profile {login.profile}" if login.profile else "botocore's default chain"
    credentials_allowed = (
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile in ~/.aws, or a container or instance role"
    )
    try:
        session = Session(profile=login.profile)
        found = session.get_credentials() is not None
        region = session.get_config_variable("region")
    except BotoCoreError as exc:  # its text may quote a credentials file line: only its type is shown
        problem, allowed = f"cannot be read ({type(exc).__name__})", credentials_allowed
    else:
        if not found:
            problem, allowed = "has no AWS credentials", credentials_allowed
        elif not region:
            problem, allowed = "has no AWS region", "AWS_REGION or AWS_DEFAULT_REGION, or region in the AWS profile"
        else:
            return
    raise ConfigError(
        f"{alias}: AWS_MSK_IAM signs with {where}, which {problem}",
        key="sasl.jaas.config" if login.profile else "sasl.mechanism",
        value="[hidden]" if login.profile else "AWS_MSK_IAM",
        allowed=allowed,
    )
