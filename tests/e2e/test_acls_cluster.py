"""ACLs in a 3-node cluster (tests/e2e/cluster_harness.py): an ACL created through a node that
is not the active controller is forwarded there (KIP-590), committed to the metadata log every
node follows, and described by every node; the forwarding node answers once its own image has
it. A deletion through another node reaches every node too, and a restarted node replays it.

Run alone:

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \
        tests/e2e/test_acls_cluster.py
"""


import pytest

from cluster_harness import running_cluster, wait_until
from e2e_helpers import unique
from test_acls_admin import (AUTHORIZER, INVALID_REQUEST, OP_ANY, OP_READ, PERM_ALLOW,
                             PERM_ANY, PT_LITERAL, RT_TOPIC, create_raw, delete_raw,
                             describe_raw_v3)

PROPAGATION_S = 15


@pytest.fixture
def cluster(request, tmp_path):
    yield from running_cluster(request, tmp_path / "cluster", overrides=AUTHORIZER)


def described(c, i, topic):
    """[(resource type, name, pattern type, number of ACLs)] of `topic` as node i has them."""
    code, _, resources = describe_raw_v3(c.bootstrap(i), RT_TOPIC, topic, PT_LITERAL)
    assert code == 0
    return resources


def test_an_acl_created_through_one_node_is_described_by_every_node(cluster):
    c = cluster
    controller = c.wait_formed()
    others = [i for i in c.ids if i != controller]
    t = unique("shared")

    # Through a node that forwards to the active controller: once answered, that node's own
    # image has the ACL, and every node follows.
    through = others[0]
    acl = (RT_TOPIC, t, PT_LITERAL, "User:alice", "*", OP_READ, PERM_ALLOW)
    assert create_raw(c.bootstrap(through), [acl]) == [(0, None)]
    assert described(c, through, t) == [(RT_TOPIC, t, PT_LITERAL, 1)]
    for i in c.ids:
        wait_until(lambda i=i: described(c, i, t) == [(RT_TOPIC, t, PT_LITERAL, 1)],
                   PROPAGATION_S, f"node {i} describes the ACL on {t}")

    # Refusals come back from the active controller; a duplicate adds nothing.
    got = create_raw(c.bootstrap(others[1]), [
        acl, (RT_TOPIC, t, PT_LITERAL, "bob", "*", OP_READ, PERM_ALLOW)])
    assert got == [(0, None), (INVALID_REQUEST,
                               "Could not parse principal from `bob` (no colon is present "
                               "separating the principal type from the principal name)")]
    # Through the active controller itself.
    assert create_raw(c.bootstrap(controller), [
        (RT_TOPIC, t, PT_LITERAL, "User:bob", "*", OP_READ, PERM_ALLOW)]) == [(0, None)]
    for i in c.ids:
        wait_until(lambda i=i: described(c, i, t) == [(RT_TOPIC, t, PT_LITERAL, 2)],
                   PROPAGATION_S, f"node {i} describes both ACLs on {t}")

    # A deletion through a node that forwards it.
    alice_only = (RT_TOPIC, t, PT_LITERAL, "User:alice", None, OP_ANY, PERM_ANY)
    assert delete_raw(c.bootstrap(others[1]), [alice_only]) == [(0, None, 1)]
    assert described(c, others[1], t) == [(RT_TOPIC, t, PT_LITERAL, 1)]
    for i in c.ids:
        wait_until(lambda i=i: described(c, i, t) == [(RT_TOPIC, t, PT_LITERAL, 1)],
                   PROPAGATION_S, f"node {i} sees the deletion")

    # A node restarted from its directory has the ACL again.
    c.stop(others[0])
    c.restart(others[0])

    def restarted_sees_it():
        try:
            return described(c, others[0], t) == [(RT_TOPIC, t, PT_LITERAL, 1)]
        except OSError:
            return False

    wait_until(restarted_sees_it, PROPAGATION_S * 2, "the restarted node describes it")
