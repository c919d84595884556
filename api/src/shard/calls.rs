//! Calls between shards as this shard makes and serves them: `Shard::call` (local, or over
//! the mesh with its reply slot and cancellation), what the mesh hands in (`Inbox`), and how
//! each call kind runs on the shard it was sent to (`Serve`).

use super::*;

impl Shard {
    /// Runs `call` on shard `target`: locally when that is this shard, else over the mesh;
    /// the reply comes back as the call's own reply type.
    ///
    /// Ordering: a remote call is pushed on the ring (or takes its place in the queue of
    /// senders waiting for space, see `Mesh::send`) before this returns its first `Pending`,
    /// and a local one runs its synchronous prefix (for produce: the append) at the first
    /// poll; so two calls made in order by one connection reach the log in order.
    pub(crate) async fn call<C: Serve<Shard>>(self: &Rc<Self>, target: usize, call: C) -> C::Reply {
        if target == self.id {
            return call.serve(self).await;
        }
        C::reply_from(
            self.call_remote(target, call.into_request(), C::CANCEL_ON_DROP)
                .await,
        )
    }

    pub(super) async fn call_remote(
        self: &Rc<Self>,
        target: usize,
        request: Request,
        cancel: bool,
    ) -> Reply {
        let id = self.next_request_id.get();
        self.next_request_id.set(id + 1);
        let (sender, receiver) = oneshot::channel();
        self.pending.borrow_mut().insert(id, sender);
        Stats::bump(&self.stats.forwarded_out);
        let mesh = self
            .mesh
            .borrow()
            .clone()
            .expect("mesh connected before serving");
        let mut guard = CancelOnDrop {
            shard: self,
            target,
            id,
            cancel_remote: cancel,
            answered: false,
        };
        mesh.send(target, ShardMsg::Request { id, body: request })
            .await;
        let reply = receiver
            .await
            .expect("a shard never drops a forwarded request");
        guard.answered = true;
        reply
    }

    /// Hands connection `moved` to shard `target`, which serves it from then on. The send
    /// waits for room on the ring when it is full, in a task of its own (the connection has
    /// nothing left to do here).
    pub fn hand_off(&self, target: usize, moved: crate::handoff::Moved) {
        Stats::bump(&self.stats.handoffs_out);
        let mesh = self
            .mesh
            .borrow()
            .clone()
            .expect("mesh connected before serving");
        glommio::spawn_local(async move {
            mesh.send(target, ShardMsg::Adopt(Box::new(moved))).await;
        })
        .detach();
    }

    /// A call from shard `source`, in arrival order (see `shard::mesh::Inbox`).
    pub(super) fn take_call(self: &Rc<Self>, source: usize, message: ShardMsg) -> Work {
        match message {
            ShardMsg::Request {
                id,
                body: Request::WaitForData(wait),
            } => {
                Stats::bump(&self.stats.forwarded_in);
                let shard = self.clone();
                if self.remote_waits.borrow().len() >= MAX_PARKED_WAITS {
                    return Work::Run(Box::pin(async move {
                        let body = Reply::WaitForData(forward::Waited::Refused);
                        shard.reply(source, id, body).await;
                    }));
                }
                let (abort, registration) = futures::future::AbortHandle::new_pair();
                self.remote_waits.borrow_mut().insert((source, id), abort);
                Work::Park(Box::pin(async move {
                    let wait = futures::future::Abortable::new(wait.serve(&shard), registration);
                    if let Ok(waited) = wait.await {
                        shard.remote_waits.borrow_mut().remove(&(source, id));
                        shard.reply(source, id, Reply::WaitForData(waited)).await;
                    }
                }))
            }
            ShardMsg::Cancel { id } => {
                if let Some(abort) = self.remote_waits.borrow_mut().remove(&(source, id)) {
                    abort.abort();
                    Stats::bump(&self.stats.cancelled_waits);
                }
                Work::Done
            }
            ShardMsg::Request { id, body } => {
                Stats::bump(&self.stats.forwarded_in);
                // A call that may wait long (a group call waits for its group's rebalance)
                // is parked, so it cannot take the running slots that other shards' short
                // calls need.
                let parked = body.parked();
                let shard = self.clone();
                let work: LocalBoxFuture<'static, ()> = Box::pin(async move {
                    let reply = forward::serve_request(&shard, body).await;
                    shard.reply(source, id, reply).await;
                });
                if parked {
                    Work::Park(work)
                } else {
                    Work::Run(work)
                }
            }
            ShardMsg::Adopt(moved) => {
                Stats::bump(&self.stats.handoffs_in);
                // A connection lives on; it is bounded by the connection limits, not by
                // the mesh's call slots.
                glommio::spawn_local(crate::connection::adopt(self.clone(), *moved)).detach();
                Work::Done
            }
        }
    }

    /// Sends the reply to call `id` of shard `target`.
    pub(super) async fn reply(&self, target: usize, id: u64, body: Reply) {
        let mesh = self.connected_mesh().await;
        mesh.reply(target, ShardReply { id, body }).await;
    }
}

/// What the mesh hands this shard's calls and replies to (`Inbox` is declared in `mod.rs`).
impl shard::mesh::Inbox<ShardMsg, ShardReply> for Inbox {
    fn call(&self, source: usize, message: ShardMsg) -> Work {
        self.0.take_call(source, message)
    }

    fn reply(&self, _source: usize, reply: ShardReply) {
        // Never waits (the mesh's deadlock freedom rests on it): the reply goes to the
        // caller's slot; a caller that gave up (a long poll answered elsewhere) left none.
        if let Some(sender) = self.0.pending.borrow_mut().remove(&reply.id) {
            let _ = sender.send(reply.body);
        }
    }
}

/// How each call runs on the shard it was sent to (remote calls come through
/// `forward::serve_request`, local ones straight from `Shard::call`).
impl Serve<Shard> for forward::Produce {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<forward::ProduceResult> {
        crate::partition_ops::produce_many(shard, self.acks, self.timeout_ms, self.parts).await
    }
}

impl Serve<Shard> for forward::Fetch {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<forward::FetchResult> {
        // Read at once, as the per-partition calls of old were: a copy-path read waits on
        // the disk. One future per part; parts are distinct partitions of this shard.
        let reads = self
            .parts
            .iter()
            .map(|part| crate::partition_ops::fetch(shard, part));
        futures::future::join_all(reads).await
    }
}

impl Serve<Shard> for forward::WaitForData {
    async fn serve(self, shard: &Rc<Shard>) -> forward::Waited {
        if self.parts.is_empty() {
            return forward::Waited::Ended;
        }
        let waits = self.parts.iter().map(|part| {
            Box::pin(crate::partition_ops::wait_for_data(
                shard,
                part,
                self.wait_ms,
            ))
        });
        futures::future::select_all(waits).await;
        forward::Waited::Ended
    }
}

impl Serve<Shard> for forward::ListOffsets {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<forward::OffsetResult> {
        let lookups = self.parts.iter().map(|part| {
            crate::partition_ops::list_offsets(
                shard,
                &part.topic_id,
                part.partition,
                part.timestamp,
                part.read_committed,
            )
        });
        futures::future::join_all(lookups).await
    }
}

impl Serve<Shard> for forward::DeleteRecords {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<(i16, i64)> {
        let mut results = Vec::with_capacity(self.parts.len());
        let mut slice = Slice::new();
        for part in &self.parts {
            results.push(crate::partition_ops::delete_records(
                shard,
                &part.topic_id,
                part.partition,
                part.offset,
            ));
            slice.tick().await;
        }
        results
    }
}

impl Serve<Shard> for forward::OffsetForLeaderEpoch {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<forward::EpochEndOffset> {
        let mut results = Vec::with_capacity(self.parts.len());
        // Parts are distinct (partition, epochs) keys, but a request may still name many
        // epochs of one partition: let the shard's other tasks run between stretches.
        let mut slice = Slice::new();
        for part in &self.parts {
            let (error_code, leader_epoch, end_offset) =
                crate::partition_ops::offset_for_leader_epoch(
                    shard,
                    &part.topic_id,
                    part.partition,
                    part.current_leader_epoch,
                    part.leader_epoch,
                );
            results.push(forward::EpochEndOffset {
                error_code,
                leader_epoch,
                end_offset,
            });
            slice.tick().await;
        }
        results
    }
}

impl Serve<Shard> for forward::DescribeProducers {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<(i16, Vec<forward::ProducerInfo>)> {
        let mut results = Vec::with_capacity(self.parts.len());
        let mut slice = Slice::new();
        for (topic_id, partition) in &self.parts {
            results.push(crate::partition_ops::describe_producers(
                shard, topic_id, *partition,
            ));
            slice.tick().await;
        }
        results
    }
}

impl Serve<Shard> for forward::CreatePartitions {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<(i16, Option<String>)> {
        shard
            .create_partitions(self.topics, self.validate_only)
            .await
    }
}

impl Serve<Shard> for forward::AllocateProducerIds {
    async fn serve(self, shard: &Rc<Shard>) -> Result<i64, i16> {
        shard.allocate_producer_ids().await
    }
}

impl Serve<Shard> for forward::CreateTopics {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<TopicOutcome> {
        shard.create_topics(self.topics, self.validate_only).await
    }
}

impl Serve<Shard> for forward::DeleteTopics {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<TopicOutcome> {
        shard.delete_topics(self.names).await
    }
}

impl Serve<Shard> for forward::AlterTopicConfigs {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<TopicOutcome> {
        shard
            .alter_topic_configs(self.changes, self.validate_only)
            .await
    }
}

impl Serve<Shard> for forward::ImageUpdate {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<TopicFailure> {
        shard.apply_image(self.0).await
    }
}

impl Serve<Shard> for forward::CloseFetchSession {
    async fn serve(self, shard: &Rc<Shard>) {
        shard.fetch_sessions.close(shard, self.session_id);
    }
}

/// Cancels a forwarded long poll whose caller was dropped before its reply came (the
/// connection closed): forgets the reply slot and tells the owner to stop waiting.
struct CancelOnDrop<'a> {
    shard: &'a Rc<Shard>,
    target: usize,
    id: u64,
    cancel_remote: bool,
    answered: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        self.shard.pending.borrow_mut().remove(&self.id);
        if self.cancel_remote {
            if let Some(mesh) = self.shard.mesh.borrow().clone() {
                // A drop cannot wait for room on the ring: a task of its own does (one per
                // abandoned long poll, each ending once its message is on the ring).
                let (target, id) = (self.target, self.id);
                glommio::spawn_local(async move {
                    mesh.send(target, ShardMsg::Cancel { id }).await;
                })
                .detach();
            }
        }
    }
}
