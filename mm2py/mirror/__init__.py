"""MM2's rules and formats, as pure code: what MirrorMaker 2 would decide, and the bytes it would write.

``policy`` (ReplicationPolicy: remote topic names), ``filters`` (TopicFilter, GroupFilter, ConfigPropertyFilter, with
``java_regex`` for MM2's Java regexes), ``record_formats`` (Heartbeat, Checkpoint, OffsetSync and Connect offsets, byte
for byte), ``progress`` (where replication progress is kept, in Connect's format), ``loss`` (records lost before they
were replicated, kept beside the progress), ``offset_syncs`` (MM2's rule for when to emit an OffsetSync),
``translation`` (offset translation from syncs), ``resume`` (where a partition resumes, and what it lost) and
``topic_partition`` (the one name for a partition of a topic). Like MM2's ``connect/mirror-client``, nothing here
opens a connection, so every rule is unit-tested without a broker.

May import: ``mm2py.errors``, ``mm2py.secrets`` and the standard library.
"""
