//! Requests Kafka reads into maps keyed by topic: a topic named in two entries of one request
//! is answered in one entry, with the partitions of both.

use std::collections::HashMap;

/// Merges the entries of `topics` that share a name into the first of them, their partitions
/// appended in request order. Allocates nothing when the request names each topic once.
pub(crate) fn merge_topics<T, P>(
    topics: &mut Vec<T>,
    name: impl Fn(&T) -> &str,
    partitions: impl Fn(&mut T) -> &mut Vec<P>,
) {
    if topics.len() < 2 || !names_repeat(topics, &name) {
        return;
    }
    let mut merged: Vec<T> = Vec::with_capacity(topics.len());
    let mut first: HashMap<String, usize> = HashMap::with_capacity(topics.len());
    for mut topic in topics.drain(..) {
        match first.get(name(&topic)) {
            Some(&at) => {
                let moved = std::mem::take(partitions(&mut topic));
                partitions(&mut merged[at]).extend(moved);
            }
            None => {
                first.insert(name(&topic).to_string(), merged.len());
                merged.push(topic);
            }
        }
    }
    *topics = merged;
}

/// Whether some name is given twice (quadratic for the few topics a request usually names,
/// without allocating; a set past that).
fn names_repeat<T>(topics: &[T], name: &impl Fn(&T) -> &str) -> bool {
    const QUADRATIC_UP_TO: usize = 16;
    if topics.len() <= QUADRATIC_UP_TO {
        return (1..topics.len()).any(|i| topics[..i].iter().any(|t| name(t) == name(&topics[i])));
    }
    let mut seen = std::collections::HashSet::with_capacity(topics.len());
    topics.iter().any(|t| !seen.insert(name(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(topics: &[(&str, &[i32])]) -> Vec<(String, Vec<i32>)> {
        let mut topics: Vec<(String, Vec<i32>)> = topics
            .iter()
            .map(|(name, parts)| (name.to_string(), parts.to_vec()))
            .collect();
        merge_topics(&mut topics, |t| t.0.as_str(), |t| &mut t.1);
        topics
    }

    #[test]
    fn a_topic_named_twice_becomes_one_entry_in_its_first_place() {
        assert_eq!(
            merged(&[("c", &[0]), ("a", &[0, 1]), ("c", &[2]), ("a", &[1])]),
            vec![("c".into(), vec![0, 2]), ("a".into(), vec![0, 1, 1])]
        );
    }

    #[test]
    fn distinct_topics_are_left_as_they_are() {
        assert_eq!(
            merged(&[("b", &[1]), ("a", &[])]),
            vec![("b".into(), vec![1]), ("a".into(), vec![])]
        );
    }

    #[test]
    fn many_topics_take_the_set_path() {
        let names: Vec<String> = (0..40).map(|i| format!("t{}", i % 30)).collect();
        let topics: Vec<(&str, &[i32])> = names.iter().map(|n| (n.as_str(), &[7][..])).collect();
        let out = merged(&topics);
        assert_eq!(out.len(), 30);
        assert_eq!(out[0], ("t0".into(), vec![7, 7]));
        assert_eq!(out[29], ("t29".into(), vec![7]));
    }
}
