"""SCRAM credentials in a 3-node cluster (tests/e2e/cluster_harness.py): a credential created
through one broker is in the metadata log every node follows, so every other broker
describes it; created through a node that is not the active controller, the change is
forwarded there (KIP-590) and the forwarding node answers once its own image has it. A
deletion through a third node reaches every node too, and a restarted node replays it.

Run alone:

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \
        tests/e2e/test_scram_cluster.py
"""


import pytest

from cluster_harness import running_cluster, wait_until
from e2e_helpers import unique
from test_scram_credentials import RESOURCE_NOT_FOUND, alter_raw, describe_raw

SHA256, SHA512 = 1, 2
PROPAGATION_S = 15


@pytest.fixture
def cluster(request, tmp_path):
    yield from running_cluster(request, tmp_path / "cluster")


def described(c, i, user):
    """(error code, [(mechanism, iterations)]) of `user` as node i describes it."""
    top, results = describe_raw(c.bootstrap(i), [user])
    assert top == 0
    ((name, code, _, infos),) = results
    assert name == user
    return code, sorted(infos)


def test_a_credential_created_through_one_broker_is_described_by_the_others(cluster):
    c = cluster
    controller = c.wait_formed()
    others = [i for i in c.ids if i != controller]
    user = unique("dora")

    # Through a node that forwards to the active controller: once answered, that node's own
    # image has the credential.
    through = others[0]
    assert alter_raw(c.bootstrap(through), upsertions=[(user, SHA256, 8192)]) == [
        (user, 0, None)]
    assert described(c, through, user) == (0, [(SHA256, 8192)])
    for i in c.ids:
        wait_until(lambda i=i: described(c, i, user) == (0, [(SHA256, 8192)]), PROPAGATION_S,
                   f"node {i} describes {user}")

    # Through the active controller itself.
    assert alter_raw(c.bootstrap(controller), upsertions=[(user, SHA512, 4096)]) == [
        (user, 0, None)]
    for i in c.ids:
        wait_until(lambda i=i: described(c, i, user) == (0, [(SHA256, 8192), (SHA512, 4096)]),
                   PROPAGATION_S, f"node {i} describes both of {user}'s mechanisms")

    # A deletion through the third node; refusals come back from the active controller.
    assert alter_raw(c.bootstrap(others[1]), deletions=[(user, SHA256)]) == [(user, 0, None)]
    assert alter_raw(c.bootstrap(others[1]), deletions=[(user, SHA256)]) == [
        (user, RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")]
    for i in c.ids:
        wait_until(lambda i=i: described(c, i, user) == (0, [(SHA512, 4096)]), PROPAGATION_S,
                   f"node {i} sees the deletion")

    # A node restarted from its directory has the credential again.
    c.stop(others[0])
    c.restart(others[0])
    def restarted_sees_it():
        try:
            return described(c, others[0], user) == (0, [(SHA512, 4096)])
        except OSError:
            return False

    wait_until(restarted_sees_it, PROPAGATION_S * 2, "the restarted node describes it")
