//! The controller mutation quota (`controller_mutation_rate`, KIP-599) of CreateTopics,
//! CreatePartitions and DeleteTopics: each topic costs the partitions it creates or deletes.
//!
//! As Kafka: from the versions that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6,
//! CreatePartitions v3, DeleteTopics v5) a topic asked for while the client is over its
//! quota is refused with it (strict mode), one asked for while within it goes ahead even if
//! it takes the client over; older versions are never refused (permissive mode). Either way
//! the response carries the throttle time and the connection is muted for it. Topics that
//! then fail (already there, invalid) give their cost back, as Kafka counts valid topics
//! only; validate-only requests cost nothing.
//!
//! Kafka applies this quota on its controller, which sees every broker's requests; here each
//! broker applies it to the requests its own clients send it (forwarded requests are not
//! charged twice), so a client spreading its requests over N brokers gets N times the rate.

use wire::ErrorCode;

use super::RequestContext;
use crate::quota::{self, QuotaKind};
use crate::shard::Shard;

/// A request's view of its client's mutation quota.
pub(super) struct MutationQuota {
    active: bool,
    strict: bool,
}

/// A topic refused for being over the quota: Kafka's code and message.
pub(super) fn refusal() -> (i16, Option<String>) {
    let code = ErrorCode::ThrottlingQuotaExceeded;
    (code.code(), Some(code.message().to_string()))
}

impl MutationQuota {
    /// `strict_since`: the first version of the API that is refused rather than only
    /// throttled.
    pub(super) fn new(
        shard: &Shard,
        ctx: &RequestContext,
        strict_since: i16,
        validate_only: bool,
    ) -> MutationQuota {
        let active = !ctx.trusted
            && !validate_only
            && shard.with_image(|image| quota::any(&image.quotas, QuotaKind::ControllerMutation));
        MutationQuota {
            active,
            strict: ctx.api_version >= strict_since,
        }
    }

    /// Charges a topic's `partitions`; false when it must be refused with [`refusal`]. The
    /// response's throttle is decided at the end ([`MutationQuota::throttle_ms`]), after
    /// the refunds.
    pub(super) fn admit(&self, shard: &Shard, ctx: &RequestContext, partitions: i32) -> bool {
        if !self.active {
            return true;
        }
        let now = std::time::Instant::now();
        let charge = |amount: f64| {
            shard.with_image(|image| {
                let (principal, client_id) = (&ctx.principal, &ctx.client_id);
                let kind = QuotaKind::ControllerMutation;
                quota::charge(&image.quotas, principal, client_id, kind, amount, now)
            })
        };
        if self.strict && charge(0.0).is_some() {
            return false;
        }
        charge(f64::from(partitions.max(0)));
        true
    }

    /// Gives back the cost of a topic admitted that then failed.
    pub(super) fn refund(&self, shard: &Shard, ctx: &RequestContext, partitions: i32) {
        if self.active {
            let cost = f64::from(partitions.max(0));
            ctx.refund_quota(shard, QuotaKind::ControllerMutation, cost);
        }
    }

    /// The response's throttle time (the request's debt once its refunds are made).
    pub(super) fn throttle_ms(&self, shard: &Shard, ctx: &mut RequestContext) -> i32 {
        if self.active {
            ctx.charge_quota(shard, QuotaKind::ControllerMutation, 0.0);
        }
        ctx.throttle_ms
    }
}
