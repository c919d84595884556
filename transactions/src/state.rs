//! The eight states of a transactional id and which moves between them are legal: Kafka's
//! `TransactionState` with its `validPreviousStates`, kept as data so the coordinator can
//! assert every transition it prepares (a move outside this table is a bug here, not bad input).

/// A transactional id's state, as Kafka stores it (`TransactionStatus` byte) and names it
/// (DescribeTransactions, ListTransactions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    /// No transaction open: after InitProducerId or a completed transaction's successor.
    Empty,
    /// Partitions have been added; the transaction is open.
    Ongoing,
    /// EndTxn(commit) is persisted; commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fence is persisted; abort markers are being written.
    PrepareAbort,
    /// Commit markers are written everywhere.
    CompleteCommit,
    /// Abort markers are written everywhere.
    CompleteAbort,
    /// The id expired; only ever a pending state (its record is a tombstone).
    Dead,
    /// Kafka's transient state while bumping the epoch to fence a producer; never persisted.
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The byte Kafka stores in `TransactionLogValue.TransactionStatus`.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state stored as `id`, or `None` for a byte Kafka does not define.
    pub fn from_id(id: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.id() == id)
    }

    /// Kafka's name for the state, as DescribeTransactions and ListTransactions show it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state named `name` (ListTransactions' state filter), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.name() == name)
    }

    /// The states a transaction may move to `self` from (Kafka's `validPreviousStates`).
    ///
    /// PrepareAbort accepts Empty, CompleteCommit and CompleteAbort because transaction
    /// version 2 lets a client abort when unsure whether a transaction is open.
    pub fn valid_previous_states(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether a transaction in `from` may move to `to`.
    pub fn is_valid_transition(from: TxnState, to: TxnState) -> bool {
        to.valid_previous_states().contains(&from)
    }

    /// Whether an idle id in this state may expire (`transactional.id.expiration.ms`).
    pub fn is_expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }

    /// PrepareCommit or PrepareAbort: markers are (being) written.
    pub fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

impl std::fmt::Display for TxnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for state in TxnState::ALL {
            assert_eq!(TxnState::from_id(state.id()), Some(state));
            assert_eq!(TxnState::from_name(state.name()), Some(state));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(TxnState::from_id(-1), None);
        assert_eq!(TxnState::PrepareEpochFence.id(), 7);
        assert_eq!(TxnState::CompleteAbort.name(), "CompleteAbort");
    }

    #[test]
    fn kafka_transition_table() {
        use TxnState::*;
        assert!(TxnState::is_valid_transition(Ongoing, PrepareCommit));
        assert!(!TxnState::is_valid_transition(Empty, PrepareCommit));
        assert!(TxnState::is_valid_transition(Empty, PrepareAbort));
        assert!(!TxnState::is_valid_transition(Ongoing, CompleteCommit));
        assert!(!TxnState::is_valid_transition(Ongoing, Dead));
        assert!(TxnState::is_valid_transition(CompleteCommit, Dead));
    }
}
