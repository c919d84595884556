//! Which topics and partitions a command works on: Kafka's topic "include list" regular
//! expressions (kafka-topics.sh's and kafka-get-offsets.sh's `--topic`), partition id sets
//! (`--partitions 0,1`) and kafka-get-offsets.sh's `--topic-partitions` patterns
//! (`topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3`).

use std::collections::BTreeSet;

use regex::Regex;

/// Kafka's legal topic names: at most 249 of `[a-zA-Z0-9._-]`.
const MAX_TOPIC_NAME_LEN: usize = 249;

/// Whether `s` is a legal topic name, which commands take as one exact name rather than as a
/// regular expression (so that `--topic my.topic` never matches `myXtopic`).
pub fn is_topic_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_TOPIC_NAME_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Kafka's `IncludeList`: the raw expression trimmed, `,` meaning `|`, spaces and surrounding
/// quotes dropped, matched against the whole topic name.
pub fn include_list(raw: &str) -> Result<Regex, String> {
    let normalized = raw.trim().replace(',', "|").replace(' ', "");
    let normalized = normalized
        .trim_start_matches(['"', '\''])
        .trim_end_matches(['"', '\'']);
    Regex::new(&format!("^(?:{normalized})$"))
        .map_err(|_| format!("{normalized} is an invalid regex."))
}

/// The partitions a rule accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partitions {
    All,
    Set(BTreeSet<i32>),
    /// `lo` inclusive, `hi` exclusive, as kafka-get-offsets.sh's `N-M`.
    Range {
        lo: i32,
        hi: i32,
    },
}

impl Partitions {
    fn accepts(&self, partition: i32) -> bool {
        match self {
            Partitions::All => true,
            Partitions::Set(set) => set.contains(&partition),
            Partitions::Range { lo, hi } => (*lo..*hi).contains(&partition),
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    topic: Regex,
    partitions: Partitions,
}

/// A set of (topic regex, partitions) rules; a topic-partition is in if any rule takes it.
#[derive(Debug, Clone)]
pub struct TopicPartitionFilter {
    rules: Vec<Rule>,
}

impl TopicPartitionFilter {
    /// `--topic` (a regex, default every topic) and `--partitions` (comma-separated ids,
    /// default every partition), as kafka-get-offsets.sh takes them.
    pub fn from_topic_and_partitions(
        topic: Option<&str>,
        partitions: Option<&str>,
    ) -> Result<Self, String> {
        let topic = include_list(topic.unwrap_or(".*"))?;
        let partitions = match partitions {
            None | Some("") => Partitions::All,
            Some(list) => Partitions::Set(
                list.split(',')
                    .map(|id| id.trim().parse::<i32>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| {
                        format!(
                            "--partitions expects a comma separated list of numeric partition \
                             ids, but received: {list}"
                        )
                    })?,
            ),
        };
        Ok(TopicPartitionFilter {
            rules: vec![Rule { topic, partitions }],
        })
    }

    /// kafka-get-offsets.sh's `--topic-partitions`: comma-separated
    /// `TOPIC_REGEX[:N | :N-M | :N- | :-M]` (M exclusive); an empty topic means every topic.
    pub fn from_patterns(spec: &str) -> Result<Self, String> {
        let grammar = Regex::new(r"^([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?$")
            .expect("constant regex");
        let rules = spec
            .split(',')
            .map(|rule| {
                let caps = grammar
                    .captures(rule)
                    .ok_or_else(|| format!("Invalid rule specification: {rule}"))?;
                let group = |i| caps.get(i).map(|m| m.as_str()).filter(|s| !s.is_empty());
                let number = |s: &str| {
                    s.parse::<i32>()
                        .map_err(|_| format!("Invalid rule specification: {rule}"))
                };
                let topic = include_list(group(1).unwrap_or(".*"))?;
                let partitions = if let Some(one) = group(2) {
                    Partitions::Set(BTreeSet::from([number(one)?]))
                } else if caps.get(0).is_some_and(|m| m.as_str().contains(':')) {
                    Partitions::Range {
                        lo: group(3).map(number).transpose()?.unwrap_or(0),
                        hi: group(4).map(number).transpose()?.unwrap_or(i32::MAX),
                    }
                } else {
                    Partitions::All
                };
                Ok(Rule { topic, partitions })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(TopicPartitionFilter { rules })
    }

    pub fn topic_allowed(&self, topic: &str) -> bool {
        self.rules.iter().any(|r| r.topic.is_match(topic))
    }

    pub fn allowed(&self, topic: &str, partition: i32) -> bool {
        self.rules
            .iter()
            .any(|r| r.topic.is_match(topic) && r.partitions.accepts(partition))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn include_list_matches_whole_names_as_kafka() {
        let re = include_list(" 'orders.*, audit' ").unwrap();
        assert!(re.is_match("orders-eu") && re.is_match("audit"));
        assert!(!re.is_match("audit-2") && !re.is_match("my-orders"));
        assert!(include_list("(").is_err());
    }

    #[test]
    fn legal_names_are_literal() {
        assert!(is_topic_name("my.topic-1_x"));
        assert!(!is_topic_name("my.*") && !is_topic_name("") && !is_topic_name("a,b"));
        assert!(!is_topic_name(&"x".repeat(250)));
    }

    #[test]
    fn topic_and_partitions() {
        let f = TopicPartitionFilter::from_topic_and_partitions(Some("t.*"), Some("0,2")).unwrap();
        assert!(f.allowed("t1", 0) && f.allowed("t1", 2) && !f.allowed("t1", 1));
        assert!(!f.allowed("x", 0) && f.topic_allowed("tt"));
        let all = TopicPartitionFilter::from_topic_and_partitions(None, None).unwrap();
        assert!(all.allowed("anything", 7));
        let err = TopicPartitionFilter::from_topic_and_partitions(None, Some("0,x")).unwrap_err();
        assert!(err.contains("--partitions expects"), "{err}");
    }

    #[test]
    fn topic_partition_patterns_as_kafka_get_offsets() {
        let f = TopicPartitionFilter::from_patterns("a:1,b:0-3,c,d:5-,e:-3,:9").unwrap();
        assert!(f.allowed("a", 1) && !f.allowed("a", 0));
        assert!(f.allowed("b", 0) && f.allowed("b", 2) && !f.allowed("b", 3));
        assert!(f.allowed("c", 123));
        assert!(!f.allowed("d", 4) && f.allowed("d", 5) && f.allowed("d", 1000));
        assert!(f.allowed("e", 2) && !f.allowed("e", 3));
        assert!(f.allowed("zzz", 9) && !f.allowed("zzz", 8));
        assert!(TopicPartitionFilter::from_patterns("a:x").is_err());
    }
}
