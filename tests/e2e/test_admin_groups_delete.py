"""`broker groups delete|delete-offsets` (kafka-consumer-groups.sh --delete / --delete-offsets)
and `groups reset-offsets --to-current|--export|--from-file` against our broker, checked with
confluent-kafka: the committed offsets a librdkafka consumer reads back (`committed()`) and the
groups its AdminClient lists.

A group whose librdkafka member is active is refused (NON_EMPTY_GROUP, and for its subscribed
topic GROUP_SUBSCRIBED_TO_TOPIC) and keeps its offsets; once the member left, delete-offsets
removes one partition's commit and delete removes the group. An exported reset plan read back
with --from-file moves a group's offsets back where they were."""

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from test_admin_groups import (PER_PARTITION, group_consumer, groups, json_lines, read_all,
                               setup_topic, wait_state)

# librdkafka's OFFSET_INVALID: what committed() answers for a partition without a commit.
NO_COMMIT = -1001


def committed(bootstrap, group, topic):
    """{partition: offset} the group has committed, as a librdkafka consumer reads them (it
    asks OffsetFetch without joining the group)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def listed_groups(bootstrap):
    a = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    result = a.list_consumer_groups().result(timeout=10)
    assert not result.errors, result.errors
    return {g.group_id for g in result.valid}


def active_group(bootstrap, topic, group, commits):
    c = group_consumer(bootstrap, group)
    c.subscribe([topic])
    read_all(c, 2 * PER_PARTITION)
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in commits.items()],
             asynchronous=False)
    return c


def test_delete_groups_and_their_offsets(broker):
    b = broker.bootstrap
    topic = setup_topic(broker)
    group = f"{topic}-del"
    c = active_group(b, topic, group, {0: 7, 1: 4})
    try:
        # Refused while the member is active; nothing changes.
        res = groups(b, "delete", "--group", group, check=False)
        assert res.returncode != 0
        assert "Deletion of some consumer groups failed:" in res.stdout
        assert (f"* Group '{group}' could not be deleted due to: NON_EMPTY_GROUP: "
                "The group is not empty.") in res.stdout
        res = groups(b, "delete-offsets", "--group", group, "--topic", topic, check=False)
        assert res.returncode != 0
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in res.stdout, res.stdout
        assert committed(b, group, topic) == {0: 7, 1: 4}
        assert group in listed_groups(b)
    finally:
        c.close()
    wait_state(b, group, "Empty")

    # delete-offsets of one partition: that commit is gone, the other stays.
    res = groups(b, "delete-offsets", "--group", group, "--topic", f"{topic}:0")
    lines = res.stdout.splitlines()
    assert lines[0] == f"Request succeed for deleting offsets with topic {topic}:0 group {group}"
    assert lines[2].split() == ["TOPIC", "PARTITION", "STATUS"]
    assert lines[3].split() == [topic, "0", "Successful"]
    assert committed(b, group, topic) == {0: NO_COMMIT, 1: 4}

    # delete: the group and its last commit are gone, for librdkafka and for `groups list`.
    (line,) = json_lines(groups(b, "delete", "--group", group, "--json").stdout)
    assert line == {"group": group, "deleted": True, "error": None, "message": None}
    assert group not in listed_groups(b)
    assert group not in groups(b, "list").stdout.split()
    assert committed(b, group, topic) == {0: NO_COMMIT, 1: NO_COMMIT}

    # A group that is not there (any more), by Kafka's error name and message.
    res = groups(b, "delete", "--group", group, check=False)
    assert res.returncode != 0 and "GROUP_ID_NOT_FOUND" in res.stdout
    res = groups(b, "delete-offsets", "--group", group, "--topic", topic, check=False)
    assert res.returncode != 0 and f"Error: '{group}' does not exist." in res.stdout


def test_reset_offsets_export_then_from_file(broker, tmp_path):
    b = broker.bootstrap
    topic = setup_topic(broker)
    group = f"{topic}-plan"
    active_group(b, topic, group, {0: 7, 1: 4}).close()
    wait_state(b, group, "Empty")

    # --to-current --export: the committed offsets as Kafka's CSV.
    res = groups(b, "reset-offsets", "--group", group, "--topic", topic, "--to-current",
                 "--export", "--dry-run")
    assert res.stdout == f"{topic},0,7\n{topic},1,4\n\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(res.stdout)

    # Move the offsets away (exported too, as --execute --export prints what it committed).
    res = groups(b, "reset-offsets", "--group", group, "--all-topics", "--to-offset", "2",
                 "--execute", "--export")
    assert res.stdout == f"{topic},0,2\n{topic},1,2\n\n"
    assert committed(b, group, topic) == {0: 2, 1: 2}

    # --from-file (no scope needed) puts them back where the plan says.
    res = groups(b, "reset-offsets", "--group", group, "--from-file", str(plan), "--execute",
                 "--json")
    assert {r["partition"]: r["new_offset"] for r in json_lines(res.stdout)} == {0: 7, 1: 4}
    assert committed(b, group, topic) == {0: 7, 1: 4}

    # A plan beyond the log end is clamped as Kafka does; a fresh member starts there.
    far = tmp_path / "far.csv"
    far.write_text(f"{topic},0,99\n{group},{topic},1,5\nother,{topic},1,0\n")
    groups(b, "reset-offsets", "--group", group, "--from-file", str(far), "--execute")
    assert committed(b, group, topic) == {0: PER_PARTITION, 1: 5}
    c = group_consumer(b, group)
    c.subscribe([topic])
    got = read_all(c, PER_PARTITION - 5)
    c.close()
    assert sorted((p, o) for p, o, _ in got) == [(1, o) for o in range(5, PER_PARTITION)]

    # Refusals: a plan without this group, no scope at all, a malformed plan.
    other = tmp_path / "other.csv"
    other.write_text(f"other,{topic},0,1\n")
    res = groups(b, "reset-offsets", "--group", group, "--from-file", str(other), check=False)
    assert res.returncode != 0 and f"No reset plan for group {group} found" in res.stderr
    res = groups(b, "reset-offsets", "--group", group, "--to-current", check=False)
    assert res.returncode != 0 and "One of the reset scopes should be defined" in res.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{topic},zero,1\n")
    res = groups(b, "reset-offsets", "--group", group, "--from-file", str(bad), check=False)
    assert res.returncode != 0 and "line 1" in res.stderr
