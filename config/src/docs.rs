//! `docs/configuration.md`, rendered from the key tables (a test keeps the file in step:
//! `UPDATE_CONFIG_DOCS=1 cargo test -p config --lib docs` rewrites it).

use std::fmt::Write;

use super::keys::{Spec, BROKER_KEYS, IGNORED_KEYS, TOPIC_KEYS};

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn rows(out: &mut String, table: &[Spec], synonym_column: bool) {
    for spec in table {
        let default = spec
            .default
            .map_or("null".to_string(), |d| format!("`{d}`"));
        let _ = write!(
            out,
            "| `{}` | {} | {} | {} |",
            spec.name,
            spec.ty.name(),
            cell(&default),
            if spec.dynamic { "yes" } else { "no" },
        );
        if synonym_column {
            let _ = write!(
                out,
                " {} |",
                spec.broker_key.map_or(String::new(), |k| format!("`{k}`"))
            );
        }
        let _ = writeln!(out, " {} |", cell(spec.doc));
    }
}

/// The configuration reference, in Markdown.
pub fn render_markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# Configuration reference\n\n\
         Generated from `config/src/keys.rs` (do not edit by hand: run\n\
         `UPDATE_CONFIG_DOCS=1 cargo test -p config --lib tests::docs`).\n\
         Key names, types and defaults are Kafka's. Broker keys are set in `server.properties`\n\
         or with `--override key=value`; topic keys with CreateTopics, AlterConfigs or\n\
         IncrementalAlterConfigs. \"Dynamic\" keys can change while the broker runs.\n\n\
         ## Broker keys\n\n\
         | Key | Type | Default | Dynamic | Description |\n\
         |---|---|---|---|---|\n",
    );
    rows(&mut out, BROKER_KEYS, false);
    out.push_str(
        "\n## Topic keys\n\n\
         A topic key not set on the topic takes the value of its broker key (Kafka's synonym),\n\
         else the Kafka default shown.\n\n\
         | Key | Type | Default | Dynamic | Broker key | Description |\n\
         |---|---|---|---|---|---|\n",
    );
    rows(&mut out, TOPIC_KEYS, true);
    out.push_str(
        "\n## Accepted and ignored\n\n\
         Kafka keys that mean nothing to a thread-per-core single node; they are accepted so an\n\
         existing `server.properties` loads, and logged as ignored:\n\n",
    );
    for key in IGNORED_KEYS {
        let _ = writeln!(out, "- `{key}`");
    }
    out
}
