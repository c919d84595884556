//! The metadata image as the quorum's state machine: a committed entry is a batch of
//! metadata records (the frames of `metadata::records`), applied in order; a snapshot is the
//! image as the records that rebuild it.

use std::collections::VecDeque;
use std::sync::Arc;

use metadata::image::Image;
use metadata::records::{decode_entry, encode_frame, MetadataRecord};
use quorum::{RestoreError, StateMachine};

/// Encodes `records` as one quorum entry.
pub fn encode_batch(records: &[MetadataRecord]) -> Vec<u8> {
    let mut buf = Vec::new();
    for record in records {
        // The frame's offset and epoch are the entry's own (index, term), known only once
        // committed; the frame carries zeroes and the entry the truth.
        encode_frame(0, 0, record, &mut buf);
    }
    buf
}

/// Decodes a quorum entry into its records.
pub fn decode_batch(
    mut bytes: &[u8],
) -> Result<Vec<MetadataRecord>, metadata::records::DecodeError> {
    let mut records = Vec::new();
    while !bytes.is_empty() {
        let (entry, used) = decode_entry(bytes)?;
        records.push(entry.record);
        bytes = &bytes[used..];
    }
    Ok(records)
}

/// Applied entries whose term is remembered: more than a leader may have in flight
/// (`quorum::node::DEFAULT_MAX_IN_FLIGHT_PROPOSALS`), so every pending proposal can be told
/// whether the entry applied at its index is its own.
pub const RECENT_TERMS: usize = 4096;

/// The image the committed metadata log builds.
#[derive(Default)]
pub struct MetadataStateMachine {
    image: Arc<Image>,
    /// Index and term of the last entry applied.
    last_applied: (u64, u64),
    /// (index, term) of the last `RECENT_TERMS` entries applied.
    recent: VecDeque<(u64, u64)>,
    /// Committed entries that did not decode (skipped; logged). A newer release's record type
    /// read by an older one is the expected cause; anything else is a bug.
    pub undecodable: u64,
}

impl MetadataStateMachine {
    /// The current image (cheap: an `Arc` clone).
    pub fn image(&self) -> Arc<Image> {
        self.image.clone()
    }

    pub fn last_applied(&self) -> (u64, u64) {
        self.last_applied
    }

    /// The term of the entry applied at `index`, if it is among the recent ones.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        let (first, _) = *self.recent.front()?;
        let i = usize::try_from(index.checked_sub(first)?).ok()?;
        self.recent
            .get(i)
            .filter(|(at, _)| *at == index)
            .map(|&(_, term)| term)
    }
}

impl StateMachine for MetadataStateMachine {
    fn apply(&mut self, index: u64, term: u64, data: &[u8]) {
        self.last_applied = (index, term);
        if self
            .recent
            .back()
            .is_some_and(|&(last, _)| last + 1 != index)
        {
            self.recent.clear(); // a snapshot was restored in between
        }
        if self.recent.len() == RECENT_TERMS {
            self.recent.pop_front();
        }
        self.recent.push_back((index, term));
        if data.is_empty() {
            return; // a new leader's no-op entry
        }
        match decode_batch(data) {
            Ok(records) => {
                let mut next = Image::clone(&self.image);
                next.apply_all(&records);
                next.offset = Some(index);
                self.image = Arc::new(next);
            }
            Err(error) => {
                self.undecodable += 1;
                tracing::error!(index, term, %error, "controller: a committed metadata entry does not decode; skipped");
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut data = Vec::new();
        let offset = self.image.offset.unwrap_or(0);
        for record in self.image.to_records() {
            encode_frame(offset, 0, &record, &mut data);
        }
        data
    }

    fn restore(&mut self, data: &[u8]) -> Result<(), RestoreError> {
        let records = decode_batch(data).map_err(|e| RestoreError(e.to_string()))?;
        let mut image = Image::from_records(&records);
        // The snapshot's frames carry the image's offset.
        image.offset = decode_entry(data).ok().map(|(e, _)| e.offset);
        self.image = Arc::new(image);
        self.recent.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn topic(name: &str, id: u8) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: [id; 16],
        }
    }

    #[test]
    fn entries_apply_and_snapshots_restore() {
        let mut sm = MetadataStateMachine::default();
        sm.apply(1, 1, &[]);
        sm.apply(2, 1, &encode_batch(&[topic("a", 1), topic("b", 2)]));
        sm.apply(3, 2, &encode_batch(&[topic("c", 3)]));
        assert_eq!(sm.image().topics_by_name.len(), 3);
        assert_eq!(sm.image().offset, Some(3));
        assert_eq!(sm.last_applied(), (3, 2));
        assert_eq!(
            (sm.term_at(1), sm.term_at(3), sm.term_at(4)),
            (Some(1), Some(2), None)
        );
        let snapshot = sm.snapshot();
        let mut other = MetadataStateMachine::default();
        other.restore(&snapshot).unwrap();
        assert_eq!(*other.image(), *sm.image());
        // Garbage is skipped and counted, never applied in part.
        sm.apply(4, 2, b"not a frame");
        assert_eq!(sm.undecodable, 1);
        assert_eq!(sm.image().topics_by_name.len(), 3);
        assert!(other.restore(b"garbage").is_err());
    }
}
