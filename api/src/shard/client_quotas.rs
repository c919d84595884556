//! Client quotas on the metadata core (KIP-546): AlterClientQuotas validated and committed
//! by its `Controller`, or sent to the active controller of a cluster. Every shard reads the
//! quotas from its own image (see `crate::quota`).

use super::*;
use crate::metadata::quotas::Refusal;

impl Shard {
    /// Metadata core only: AlterClientQuotas. Validated against the committed image and its
    /// records committed (one batch) and published to every shard before the answer; in a
    /// cluster whose active controller is another node, sent there.
    pub(super) async fn alter_client_quotas(
        self: &Rc<Self>,
        call: forward::AlterClientQuotas,
    ) -> Vec<Result<(), Refusal>> {
        let controller = self
            .controller
            .as_ref()
            .expect("AlterClientQuotas runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return super::to_controller::alter_client_quotas(to, &call).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let altered = controller
            .borrow_mut()
            .alter_client_quotas(&call.alterations, call.validate_only);
        let mut results = match altered {
            Ok(results) => results,
            Err(error) => {
                tracing::error!(%error, "client quotas not written to the metadata log");
                let refusal = Refusal {
                    code: ErrorCode::UnknownServerError.code(),
                    message: error.to_string(),
                };
                return vec![Err(refusal); call.alterations.len()];
            }
        };
        if !call.validate_only && results.iter().any(Result::is_ok) {
            if let Err(code) = self.publish_image().await {
                for result in results.iter_mut().filter(|r| r.is_ok()) {
                    *result = Err(Refusal {
                        code,
                        message: control_plane::NOT_COMMITTED.into(),
                    });
                }
            }
        }
        results
    }
}

impl Serve<Shard> for forward::AlterClientQuotas {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<Result<(), Refusal>> {
        shard.alter_client_quotas(self).await
    }
}
