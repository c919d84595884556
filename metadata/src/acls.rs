//! ACLs in the metadata (as Kafka 4's KRaft keeps them): the image's ACLs (an
//! [`acl::Authorizer`] built from AccessControlEntryRecord and RemoveAccessControlEntryRecord),
//! CreateAcls and DeleteAcls validated and turned into records as Kafka's `AclControlManager`
//! does, and DescribeAcls answered from an image as Kafka's `AclApis` answers it.
//!
//! Runs wherever the image is: the changes on the metadata core (the active controller's),
//! DescribeAcls on every shard. Bounds: one CreateAcls or DeleteAcls writes at most
//! [`MAX_RECORDS_PER_USER_OP`] records (Kafka's `QuorumController.MAX_RECORDS_PER_USER_OP`);
//! an image change that touches ACLs copies them once per batch (O(ACLs)).

use acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclError, AclId, Authorizer, ResourcePattern,
};

use std::collections::HashSet;

use crate::records::MetadataRecord;
use crate::LogError;

/// Most records one CreateAcls or DeleteAcls may write (Kafka's `MAX_RECORDS_PER_USER_OP`);
/// over it nothing is written and every ACL or filter is refused.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// Kafka's UNKNOWN_SERVER_ERROR and the message `ApiError.fromThrowable` gives it (the
/// exception's own text is not sent).
const UNKNOWN_SERVER_ERROR: i16 = -1;
const UNKNOWN_SERVER_ERROR_MESSAGE: &str =
    "The server experienced an unexpected error when processing the request.";

/// One ACL's result of a CreateAcls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclCreateResult {
    pub error_code: i16,
    pub error_message: Option<String>,
}

impl AclCreateResult {
    pub const SUCCESS: AclCreateResult = AclCreateResult {
        error_code: 0,
        error_message: None,
    };

    pub fn refused(error_code: i16, message: impl Into<String>) -> Self {
        AclCreateResult {
            error_code,
            error_message: Some(message.into()),
        }
    }
}

/// One filter's result of a DeleteAcls: an error, or the bindings it deleted (each deleted
/// with error code 0, Kafka's `AclBindingDeleteResult` without an exception).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclDeleteResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub deleted: Vec<AclBinding>,
}

impl AclDeleteResult {
    pub fn refused(error_code: i16, message: impl Into<String>) -> Self {
        AclDeleteResult {
            error_code,
            error_message: Some(message.into()),
            deleted: Vec::new(),
        }
    }
}

/// A private copy of `acls` (the next image's, which a batch of ACL records changes):
/// `Authorizer` is not `Clone`, so the ACLs are added again under their ids.
pub fn copy(acls: &Authorizer) -> Authorizer {
    let entries = acls.entries().map(|(id, binding)| (id, binding.clone()));
    Authorizer::from_acls(acls.config().clone(), entries)
        .expect("ACLs taken from an authorizer have distinct ids and bindings")
}

/// Applies an ACL record. One that cannot apply (an id or binding already present, an
/// unknown id) is ignored (logged): a valid log never holds one, and refusing would make a
/// damaged log unrecoverable (Kafka's replay throws).
pub fn apply(acls: &mut Authorizer, record: &MetadataRecord) {
    let applied = match record {
        MetadataRecord::AccessControlEntry { id, binding } => acls.add(*id, binding.clone()),
        MetadataRecord::RemoveAccessControlEntry { id } => acls.remove(*id).map(|_| ()),
        _ => return,
    };
    if let Err(error) = applied {
        tracing::warn!(%error, "ACL record not applied");
    }
}

/// Records that rebuild these ACLs (a snapshot's share), in Kafka's order.
pub fn to_records(acls: &Authorizer) -> impl Iterator<Item = MetadataRecord> + '_ {
    acls.entries()
        .map(|(id, binding)| MetadataRecord::AccessControlEntry {
            id,
            binding: binding.clone(),
        })
}

/// CreateAcls against `acls`, as Kafka's `AclControlManager.createAcls`: each binding
/// validated on its own ([`acl::validate_new`]: INVALID_REQUEST with Kafka's message); one
/// already stored, or already created earlier in this request, is a success that writes
/// nothing; every other gets a new random id from `new_id` (drawn again while it collides).
/// Returns the records, to be committed together, and one result per binding, in order.
pub fn create(
    acls: &Authorizer,
    bindings: &[AclBinding],
    mut new_id: impl FnMut() -> AclId,
) -> (Vec<MetadataRecord>, Vec<AclCreateResult>) {
    // Stored and staged bindings and ids, each looked up once per binding: O(ACLs + request).
    let mut known: HashSet<&AclBinding> = acls.bindings().collect();
    let mut staged_ids: HashSet<AclId> = HashSet::new();
    let mut records: Vec<MetadataRecord> = Vec::new();
    let mut results = Vec::with_capacity(bindings.len());
    for binding in bindings {
        if let Err(error) = acl::validate_new(binding) {
            results.push(AclCreateResult::refused(
                error.error_code(),
                error.to_string(),
            ));
            continue;
        }
        if known.insert(binding) {
            let id = loop {
                let id = new_id();
                if acls.get(&id).is_none() && staged_ids.insert(id) {
                    break id;
                }
            };
            records.push(MetadataRecord::AccessControlEntry {
                id,
                binding: binding.clone(),
            });
        }
        results.push(AclCreateResult::SUCCESS);
    }
    if records.len() > MAX_RECORDS_PER_USER_OP {
        let refused = AclCreateResult::refused(UNKNOWN_SERVER_ERROR, UNKNOWN_SERVER_ERROR_MESSAGE);
        return (Vec::new(), vec![refused; bindings.len()]);
    }
    (records, results)
}

/// DeleteAcls against `acls`, as Kafka's `AclControlManager.deleteAcls`: each filter
/// validated ([`acl::validate_filter`]); a valid one deletes every stored binding it matches
/// (an ACL matched by several filters is listed by each and removed once). Returns the
/// records, to be committed together, and one result per filter, in order.
pub fn delete(
    acls: &Authorizer,
    filters: &[AclBindingFilter],
) -> (Vec<MetadataRecord>, Vec<AclDeleteResult>) {
    let mut removed: Vec<AclId> = Vec::new();
    let mut seen = HashSet::new();
    let mut results = Vec::with_capacity(filters.len());
    for filter in filters {
        if let Err(error) = acl::validate_filter(filter) {
            results.push(AclDeleteResult::refused(
                error.error_code(),
                error.to_string(),
            ));
            continue;
        }
        let mut deleted = Vec::new();
        for (id, binding) in acls.matching(filter) {
            deleted.push(binding.clone());
            if seen.insert(id) {
                removed.push(id);
            }
        }
        results.push(AclDeleteResult {
            error_code: 0,
            error_message: None,
            deleted,
        });
    }
    if removed.len() > MAX_RECORDS_PER_USER_OP {
        let refused = AclDeleteResult::refused(UNKNOWN_SERVER_ERROR, UNKNOWN_SERVER_ERROR_MESSAGE);
        return (Vec::new(), vec![refused; filters.len()]);
    }
    let records = removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry { id })
        .collect();
    (records, results)
}

/// DescribeAcls from `acls`: the bindings `filter` selects, grouped by resource pattern as
/// Kafka's `DescribeAclsResponse.aclsResources` groups them (one entry per pattern with its
/// entries), in Kafka's order of bindings (Kafka's is a hash map's). A filter with an
/// `UNKNOWN` value is refused (INVALID_REQUEST; Kafka fails the request's parse).
pub fn describe(
    acls: &Authorizer,
    filter: &AclBindingFilter,
) -> Result<Vec<(ResourcePattern, Vec<AccessControlEntry>)>, AclError> {
    acl::validate_filter(filter)?;
    let mut resources: Vec<(ResourcePattern, Vec<AccessControlEntry>)> = Vec::new();
    for binding in acls.acls(filter) {
        match resources.last_mut() {
            Some((pattern, entries)) if *pattern == binding.pattern => {
                entries.push(binding.entry.clone());
            }
            _ => resources.push((binding.pattern.clone(), vec![binding.entry.clone()])),
        }
    }
    Ok(resources)
}

impl crate::Controller {
    /// CreateAcls, validated against the current image as Kafka's `AclControlManager`
    /// validates it (see [`create`]); the records of the new ACLs are committed together
    /// before this returns. One result per binding.
    pub fn create_acls(
        &mut self,
        bindings: &[AclBinding],
    ) -> Result<Vec<AclCreateResult>, LogError> {
        let (records, results) = create(&self.image.acls, bindings, crate::random_topic_id);
        if !records.is_empty() {
            self.commit(&records)?;
        }
        Ok(results)
    }

    /// DeleteAcls (see [`delete`]); the removals are committed together before this
    /// returns. One result per filter.
    pub fn delete_acls(
        &mut self,
        filters: &[AclBindingFilter],
    ) -> Result<Vec<AclDeleteResult>, LogError> {
        let (records, results) = delete(&self.image.acls, filters);
        if !records.is_empty() {
            self.commit(&records)?;
        }
        Ok(results)
    }
}

#[cfg(test)]
#[path = "acls_tests.rs"]
mod tests;
