//! `bench limits`' output: one table row per figure, with what it is the floor or ceiling of.

use super::Limits;

/// One row of the limits table.
pub struct Row {
    pub key: &'static str,
    pub label: String,
    pub value: f64,
    pub unit: &'static str,
}

/// The table's rows, in order.
pub fn rows(l: &Limits) -> Vec<Row> {
    let row = |key, label: &str, value, unit| Row {
        key,
        label: label.to_string(),
        value,
        unit,
    };
    let mut rows = vec![
        row(
            "tcp_loopback_mib_s",
            "loopback TCP throughput (1 stream)",
            l.tcp_loopback_mib_s,
            "MiB/s",
        ),
        row(
            "tcp_send_cpu_s_per_gib",
            "loopback TCP sender CPU",
            l.tcp_send_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "tcp_recv_cpu_s_per_gib",
            "loopback TCP receiver CPU",
            l.tcp_recv_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "produce_floor_recv_cpu_s_per_gib",
            "produce floor: loopback receive into a buffer, receiver CPU",
            l.produce_floor_recv_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "produce_floor_pwrite_cpu_s_per_gib",
            "produce floor: pwrite of the same bytes to the page cache (no fsync)",
            l.produce_floor_pwrite_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "produce_floor_cpu_s_per_gib",
            "produce floor: receive + page-cache write (compare with produce CPU/GiB)",
            l.produce_floor_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "fdatasync_4k_p50_ms",
            "4 KiB write + fdatasync p50",
            l.fdatasync_4k_p50_ms,
            "ms",
        ),
        row(
            "fdatasync_4k_p99_ms",
            "4 KiB write + fdatasync p99 (the acks=all target's base)",
            l.fdatasync_4k_p99_ms,
            "ms",
        ),
        row(
            "fdatasync_4k_p99_9_ms",
            "4 KiB write + fdatasync p99.9",
            l.fdatasync_4k_p99_9_ms,
            "ms",
        ),
        row(
            "fdatasync_4k_per_s",
            "4 KiB write + fdatasync rate",
            l.fdatasync_4k_per_s,
            "syncs/s",
        ),
        row(
            "disk_write_mib_s",
            "buffered writes + 1 fdatasync",
            l.disk_write_mib_s,
            "MiB/s",
        ),
        row(
            "ring_aes128gcm_cpu_s_per_gib",
            "AES-128-GCM seal CPU (ring, 16 KiB records: the TLS path's crypto)",
            l.ring_aes128gcm_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "ring_aes128gcm_mib_s",
            "AES-128-GCM seal throughput (ring, 16 KiB records, 1 core)",
            l.ring_aes128gcm_mib_s,
            "MiB/s",
        ),
        row(
            "openssl_aes128gcm_mib_s",
            "AES-128-GCM `openssl speed -evp`, 16 KiB blocks (1 core)",
            l.openssl_aes128gcm_mib_s.unwrap_or(f64::NAN),
            "MiB/s",
        ),
        row(
            "aes128gcm_cpu_s_per_gib",
            "AES-128-GCM seal CPU (RustCrypto aes-gcm, 64 KiB; not the TLS path's)",
            l.aes128gcm_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "aes128gcm_mib_s",
            "AES-128-GCM seal throughput (RustCrypto aes-gcm, 64 KiB, 1 core)",
            l.aes128gcm_mib_s,
            "MiB/s",
        ),
        row(
            "sendfile_mib_s",
            "sendfile page cache -> loopback",
            l.sendfile_mib_s,
            "MiB/s",
        ),
        row(
            "sendfile_cpu_s_per_gib",
            "sendfile sender CPU",
            l.sendfile_cpu_s_per_gib,
            "s/GiB",
        ),
    ];
    if let Some(n) = &l.null {
        let c = n.client.name();
        rows.extend([
            row(
                "null_produce_100b_records_s",
                &format!("null broker produce 100 B, max rate ({c})"),
                n.produce_100b_records_s,
                "records/s",
            ),
            row(
                "null_produce_100b_mib_s",
                &format!("null broker produce 100 B, max rate ({c})"),
                n.produce_100b_mib_s,
                "MiB/s",
            ),
            row(
                "null_produce_100b_p50_ms",
                "null broker produce 100 B, max rate, p50",
                n.produce_100b_p50_ms,
                "ms",
            ),
            row(
                "null_produce_100b_p99_ms",
                "null broker produce 100 B, max rate, p99",
                n.produce_100b_p99_ms,
                "ms",
            ),
            row(
                "null_produce_100b_broker_cpu_us_per_record",
                "null broker CPU per record (max rate)",
                n.produce_100b_broker_cpu_us_per_record,
                "µs/record",
            ),
            row(
                "null_produce_100b_client_cpu_s_per_gib",
                &format!("{c} producer CPU (max rate)"),
                n.produce_100b_client_cpu_s_per_gib,
                "s/GiB",
            ),
            row(
                "null_produce_100b_records_per_request",
                "records per Produce request (max rate)",
                n.produce_100b_records_per_request,
                "records",
            ),
            row(
                "null_fixed_rate_p50_ms",
                &format!(
                    "null broker produce 100 B at {} records/s, p50 ({})",
                    n.fixed_rate, n.latency_client
                ),
                n.fixed_rate_p50_ms,
                "ms",
            ),
            row(
                "null_fixed_rate_p99_ms",
                &format!(
                    "null broker produce 100 B at {} records/s, p99 ({})",
                    n.fixed_rate, n.latency_client
                ),
                n.fixed_rate_p99_ms,
                "ms",
            ),
            row(
                "null_fixed_rate_p99_9_ms",
                &format!(
                    "null broker produce 100 B at {} records/s, p99.9 ({})",
                    n.fixed_rate, n.latency_client
                ),
                n.fixed_rate_p99_9_ms,
                "ms",
            ),
            row(
                "null_fixed_rate_broker_cpu_us_per_request",
                "null broker CPU per Produce request (fixed rate)",
                n.fixed_rate_broker_cpu_us_per_request,
                "µs/request",
            ),
            row(
                "null_fixed_rate_records_per_request",
                "records per Produce request (fixed rate)",
                n.fixed_rate_records_per_request,
                "records",
            ),
            row(
                "null_consume_1kb_mib_s",
                &format!("null broker consume 1 KiB ({c})"),
                n.consume_1kb_mib_s,
                "MiB/s",
            ),
            row(
                "null_consume_1kb_client_cpu_s_per_gib",
                &format!("{c} consumer CPU"),
                n.consume_1kb_client_cpu_s_per_gib,
                "s/GiB",
            ),
        ]);
    }
    rows
}

/// The Markdown table: `| key | measure | value | unit |`.
pub fn markdown_table(l: &Limits) -> String {
    let mut out = String::from("| key | measure | value | unit |\n|---|---|---:|---|\n");
    for r in rows(l) {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.key,
            r.label,
            crate::compare::fmt_num(Some(r.value)),
            r.unit
        ));
    }
    out
}
