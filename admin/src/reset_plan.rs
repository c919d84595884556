//! The CSV form of a reset plan, as kafka-consumer-groups.sh writes it with `--reset-offsets
//! --export` and reads it with `--from-file`: one `topic,partition,offset` line per partition
//! (a plan of one group), or `group,topic,partition,offset` lines (a plan of several).

use std::collections::BTreeMap;

/// A plan line that is not `[group,]topic,partition,offset`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line} of the reset plan: {reason}: {text:?}")]
pub struct PlanError {
    pub line: usize,
    pub reason: &'static str,
    pub text: String,
}

/// New offsets by topic and partition.
pub type Plan = BTreeMap<(String, i32), i64>;

/// The CSV of `plan` for one group, as Kafka's `--export` prints it: a line per partition, then
/// the empty line its final `println` adds.
pub fn export(plan: &[(String, i32, i64)]) -> String {
    let mut csv: String = plan
        .iter()
        .map(|(topic, partition, offset)| format!("{topic},{partition},{offset}\n"))
        .collect();
    csv.push('\n');
    csv
}

/// The offsets `text` plans for `group`: every `topic,partition,offset` line, and the
/// `group,topic,partition,offset` lines naming `group`. Blank lines are skipped.
pub fn parse(text: &str, group: &str) -> Result<Plan, PlanError> {
    let mut plan = Plan::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let error = |reason| PlanError {
            line: i + 1,
            reason,
            text: raw.to_owned(),
        };
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let (topic, partition, offset) = match fields.as_slice() {
            [t, p, o] => (*t, *p, *o),
            [g, t, p, o] if *g == group => (*t, *p, *o),
            [_, _, _, _] => continue,
            _ => return Err(error("expected topic,partition,offset")),
        };
        if topic.is_empty() {
            return Err(error("no topic"));
        }
        let partition: i32 = partition
            .parse()
            .ok()
            .filter(|p| *p >= 0)
            .ok_or_else(|| error("bad partition"))?;
        let offset: i64 = offset.parse().map_err(|_| error("bad offset"))?;
        plan.insert((topic.to_owned(), partition), offset);
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_is_kafkas_csv_and_reads_back() {
        let rows = vec![("orders".to_owned(), 0, 5), ("orders".to_owned(), 1, 7)];
        let csv = export(&rows);
        assert_eq!(csv, "orders,0,5\norders,1,7\n\n");
        let plan = parse(&csv, "g").unwrap();
        assert_eq!(
            plan.into_iter().collect::<Vec<_>>(),
            vec![(("orders".to_owned(), 0), 5), (("orders".to_owned(), 1), 7)]
        );
    }

    #[test]
    fn several_groups_plan_keeps_only_ours() {
        let plan = parse("g,t,0,1\nother,t,0,9\ng,t,1,2\n", "g").unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!(plan[&("t".to_owned(), 1)], 2);
        assert!(parse("other,t,0,9\n", "g").unwrap().is_empty());
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        assert_eq!(parse("t,0,1\nt,x,1\n", "g").unwrap_err().line, 2);
        assert_eq!(
            parse("t,0\n", "g").unwrap_err().reason,
            "expected topic,partition,offset"
        );
        assert_eq!(parse("t,-1,3\n", "g").unwrap_err().reason, "bad partition");
        assert_eq!(parse("t,0,z\n", "g").unwrap_err().reason, "bad offset");
        assert_eq!(parse(",0,1\n", "g").unwrap_err().reason, "no topic");
    }
}
