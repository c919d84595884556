//! SCRAM credentials on a shard (KIP-554): the metadata core's AlterUserScramCredentials
//! (validated and committed by its `Controller`, or sent to the active controller), and the
//! lookup every shard's connections make while authenticating, answered from the shard's
//! current image without a lock or a mesh call.

use sasl::scram::{ScramCredential, ScramMechanism};

use super::*;
use crate::metadata::scram::AlterResult;

impl Shard {
    /// The SCRAM credential of `user` for `mechanism`, from this shard's image: two map
    /// probes and a copy of the keys, no lock, no mesh call, so any shard's connection code
    /// can call it while authenticating. `None`: no such credential (yet: one created through
    /// another broker of a cluster appears once this node's image has it).
    pub fn scram_credential(
        &self,
        mechanism: ScramMechanism,
        user: &str,
    ) -> Option<ScramCredential> {
        let image = self.image.borrow();
        let entry = image.scram.get(mechanism.kafka_type(), user)?;
        Some(ScramCredential {
            mechanism,
            salt: entry.salt.clone(),
            iterations: u32::try_from(entry.iterations).ok()?,
            stored_key: entry.stored_key.clone(),
            server_key: entry.server_key.clone(),
        })
    }

    /// Metadata core only: AlterUserScramCredentials. Validated against the committed image
    /// and its records committed (one batch) and published to every shard before the answer;
    /// in a cluster whose active controller is another node, sent there.
    pub(super) async fn alter_scram_credentials(
        self: &Rc<Self>,
        call: forward::AlterScramCredentials,
    ) -> Vec<AlterResult> {
        let controller = self
            .controller
            .as_ref()
            .expect("AlterUserScramCredentials runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return super::to_controller::alter_scram_credentials(to, &call).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let altered = controller.borrow_mut().alter_scram_credentials(
            &call.deletions,
            &call.upsertions,
            derive_keys,
        );
        let mut results = match altered {
            Ok(results) => results,
            Err(error) => {
                tracing::error!(%error, "SCRAM credentials not written to the metadata log");
                return call.refuse_all(ErrorCode::UnknownServerError.code(), &error.to_string());
            }
        };
        if results.iter().any(|r| r.error_code == 0) {
            if let Err(code) = self.publish_image().await {
                for result in results.iter_mut().filter(|r| r.error_code == 0) {
                    result.error_code = code;
                    result.error_message = Some(control_plane::NOT_COMMITTED.into());
                }
            }
        }
        results
    }
}

/// (StoredKey, ServerKey) of a salted password, for a mechanism already validated.
fn derive_keys(mechanism: i8, salted_password: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mechanism = ScramMechanism::from_kafka_type(mechanism)
        .expect("the mechanism was validated before the keys are derived");
    // Salt and iterations are kept from the request; only the keys are derived here.
    let credential = ScramCredential::from_salted_password(mechanism, &[], salted_password, 0);
    (credential.stored_key, credential.server_key)
}

impl Serve<Shard> for forward::AlterScramCredentials {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<AlterResult> {
        shard.alter_scram_credentials(self).await
    }
}
