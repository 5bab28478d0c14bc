"""``cutover --deny-writes``: cluster A made to refuse writes to the flow's topics, and failback's undoing of it.

Why an ACL: with an authorizer on A, a DENY binding wins over every ALLOW (Kafka's authorizers look for a
matching DENY first), so one binding per topic, DENY WRITE for ``User:*`` from any host, stops every producer
that is not a super user at once, with no change on the producers' side. Super users are not bound by ACLs at
all; the report says so. Only the bindings that did not exist before are added, recorded in the cut-over mark
on B, and deleted again by failback (or at once, when the cut-over is refused or fails), so a binding the
operator had set up is never removed. Needs Alter on A's cluster resource (CreateAcls, DeleteAcls) and Describe
on it (DescribeAcls). Driver side only.
"""

from __future__ import annotations

from collections.abc import Iterable

from mm2py.errors import CheckFailed
from mm2py.librdkafka.admin import ClusterAdmin
from mm2py.librdkafka.admin_acls import SecurityDisabledError, TopicAcl

ANY_USER = "User:*"


def write_denials(topics: Iterable[str]) -> list[TopicAcl]:
    """The binding per topic that makes A refuse every non-super producer's writes."""
    return [TopicAcl(topic, "LITERAL", ANY_USER, "*", "WRITE", "DENY") for topic in sorted(set(topics))]


def deny_writes(admin: ClusterAdmin, topics: Iterable[str], *, dry_run: bool) -> list[TopicAcl]:
    """Add the denials A lacks; returns them (in a dry run, those it would add). A cluster without an authorizer,
    or a binding the brokers refuse, is a check that fails (what was added before it is deleted again)."""
    try:
        existing = set(admin.describe_topic_acls())
    except SecurityDisabledError:
        raise CheckFailed(
            f"--deny-writes: {admin.alias} has no authorizer, so no ACL can make it refuse writes; "
            "stop its producers instead"
        ) from None
    missing = [acl for acl in write_denials(topics) if acl not in existing]
    if dry_run or not missing:
        return missing
    outcome = admin.create_topic_acls(missing)
    refused = {acl: error for acl, error in outcome.items() if error}
    if refused:
        admin.delete_topic_acls([acl for acl in missing if acl not in refused])
        acl, error = next(iter(refused.items()))
        raise CheckFailed(
            f"--deny-writes: {admin.alias} refused DENY WRITE on topic {acl.topic} for {ANY_USER}: {error}"
        )
    return missing


def allow_writes_again(admin: ClusterAdmin, denials: Iterable[TopicAcl]) -> int:
    """Delete exactly the denials a cut-over added; returns how many bindings A deleted."""
    return admin.delete_topic_acls(list(denials))
