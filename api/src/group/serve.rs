//! How each group call runs on the shard that owns its group's partition: the `Coordinator`
//! method of the same name, once the serving shard knows its partition
//! (`Coordinator::wait_known`). The call types are in `calls` (data, below `shard`, listed
//! in `forward`'s `calls!`); these impls sit above both.

use std::rc::Rc;

use super::calls::*;
use super::Coordinator;
use crate::forward::Serve;
use crate::shard::Shard;

impl Serve<Shard> for JoinGroup {
    async fn serve(self, shard: &Rc<Shard>) -> JoinReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::join(shard, self.partition, self.group_id, self.args).await
    }
}

impl Serve<Shard> for SyncGroup {
    async fn serve(self, shard: &Rc<Shard>) -> SyncReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::sync(shard, self).await
    }
}

impl Serve<Shard> for Heartbeat {
    async fn serve(self, shard: &Rc<Shard>) -> HeartbeatReply {
        Coordinator::wait_known(shard, self.partition).await;
        shard.coordinator.heartbeat(self)
    }
}

impl Serve<Shard> for LeaveGroup {
    async fn serve(self, shard: &Rc<Shard>) -> LeaveReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::leave(shard, self.partition, &self.group_id, self.members).await
    }
}

impl Serve<Shard> for OffsetCommit {
    async fn serve(self, shard: &Rc<Shard>) -> OffsetCommitReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::offset_commit(shard, self.partition, self.request, self.version).await
    }
}

impl Serve<Shard> for OffsetFetch {
    async fn serve(self, shard: &Rc<Shard>) -> OffsetFetchReply {
        Coordinator::wait_known(shard, self.partition).await;
        shard.coordinator.offset_fetch(self)
    }
}

impl Serve<Shard> for OffsetDelete {
    async fn serve(self, shard: &Rc<Shard>) -> OffsetDeleteReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::offset_delete(shard, self.partition, self.request).await
    }
}

impl Serve<Shard> for DescribeGroup {
    async fn serve(self, shard: &Rc<Shard>) -> DescribeReply {
        Coordinator::wait_known(shard, self.partition).await;
        shard.coordinator.describe(self.partition, self.group_id)
    }
}

impl Serve<Shard> for ListGroups {
    async fn serve(self, shard: &Rc<Shard>) -> ListReply {
        shard.coordinator.list()
    }
}

impl Serve<Shard> for DeleteGroup {
    async fn serve(self, shard: &Rc<Shard>) -> DeleteReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::delete_group(shard, self.partition, &self.group_id).await
    }
}

impl Serve<Shard> for ConsumerHeartbeat {
    async fn serve(self, shard: &Rc<Shard>) -> ConsumerHeartbeatReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::consumer_heartbeat(shard, self).await
    }
}

impl Serve<Shard> for ConsumerDescribe {
    async fn serve(self, shard: &Rc<Shard>) -> ConsumerDescribeReply {
        Coordinator::wait_known(shard, self.partition).await;
        let config = &shard.config.groups.consumer;
        shard
            .coordinator
            .consumer_describe(self.partition, &self.group_id, config)
    }
}

impl Serve<Shard> for TxnOffsetCommit {
    async fn serve(self, shard: &Rc<Shard>) -> TxnOffsetCommitReply {
        Coordinator::wait_known(shard, self.partition).await;
        Coordinator::txn_offset_commit(shard, self.partition, self.request, self.version).await
    }
}
