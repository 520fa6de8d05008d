//! Which parameters Sluice does not act on, and why: the one list behind
//! the "in effect" column of `docs/config.md` and the start-up warnings.
//! Every parameter not named here is acted on somewhere; a test reads the
//! sources and checks both directions (each parameter listed here is read
//! nowhere outside the configuration code, each other one is read
//! somewhere), so the list cannot drift from the code.

/// Why Sluice does not act on the parameter `name` (its primary name), or
/// `None` when it does. The reason completes "Sluice does not act on it:".
pub fn not_in_effect(name: &str) -> Option<&'static str> {
    const NO_CLUSTER_TLS: &str = "not yet in effect: Sluice's cluster bus runs over plain TCP only";
    const NO_DEFRAG: &str = "Sluice has no active defragmenter (Redis refuses `activedefrag \
                             yes` too unless built with its own jemalloc; Debian's is not)";
    const RUSTLS: &str = "Sluice's TLS (rustls) reads unencrypted PEM keys only and does not \
                          present a separate client certificate";
    const NO_CPU_LISTS: &str = "Sluice does not pin its threads to CPUs; use `taskset` on the \
                                process";
    const REPL_LATER: &str = "not yet in effect: Sluice's replication has no such mode yet \
                              (the cluster and replication issue)";
    Some(match name {
        "io-threads" | "io-threads-do-reads" => {
            "Sluice's event-loop threads (`threads`) each read, execute and write for their \
             own connections; Redis's separate I/O threads have no counterpart"
        }
        "dynamic-hz" => "Sluice's timers run at the configured `hz` whatever the client count",
        "crash-memcheck-enabled" => "Sluice has no memory test to run after a crash",
        "enable-module-command" => "Sluice loads no modules (MODULE LOAD is refused)",
        "ignore-warnings" => {
            "Sluice runs none of the system checks this silences (Redis 7.0's only one is \
             ARM64-COW-BUG)"
        }
        "rdb-save-incremental-fsync" | "aof-rewrite-incremental-fsync" => {
            "Sluice writes a snapshot or a rewrite through one buffer and fsyncs the file once, \
             when it is complete"
        }
        "activerehashing" => {
            "Sluice's hash tables are split by lock stripe and resize at once (microseconds \
             each); there is no incremental rehashing to drive"
        }
        "lazyfree-lazy-eviction" | "lazyfree-lazy-expire" | "lazyfree-lazy-server-del" => {
            "not yet in effect: Sluice frees evicted, expired and overwritten values in place \
             (UNLINK, DEL with `lazyfree-lazy-user-del`, and FLUSHALL/FLUSHDB with ASYNC or \
             `lazyfree-lazy-user-flush` free in the background)"
        }
        "list-compress-depth" => {
            "not yet in effect: Sluice does not LZF-compress list chunks (OBJECT ENCODING is \
             `quicklist` either way; memory is not reduced)"
        }
        "sanitize-dump-payload" => {
            "Sluice decodes every RESTORE payload and every value of an RDB file in full and \
             refuses one that fails Redis's deep integrity checks whatever this says (as with \
             `yes`); `no` cannot turn the checks off"
        }
        "replica-lazy-flush" => {
            "a replica frees its old dataset as a lazy FLUSHALL does whatever this says"
        }
        "replica-ignore-maxmemory" => REPL_LATER,
        "replica-ignore-disk-write-errors" => REPL_LATER,
        "cluster-migration-barrier" => {
            "not yet in effect: Sluice's cluster does not move replicas to orphaned masters"
        }
        "cluster-link-sendbuf-limit" => {
            "Sluice's cluster bus writes each message whole on its link and closes a link whose \
             peer takes none for a second, so no send buffer grows"
        }
        "cluster-announce-tls-port" | "tls-cluster" => NO_CLUSTER_TLS,
        "tls-key-file-pass"
        | "tls-client-cert-file"
        | "tls-client-key-file"
        | "tls-client-key-file-pass" => RUSTLS,
        "tls-dh-params-file" => {
            "Sluice's TLS (rustls) offers only ECDHE key exchange, which needs no DH parameters"
        }
        "tls-session-cache-timeout" => {
            "rustls keeps sessions until the cache (`tls-session-cache-size`) evicts them"
        }
        "tls-replication" => "not yet in effect: Sluice replicates over plain TCP only",
        "activedefrag"
        | "active-defrag-ignore-bytes"
        | "active-defrag-threshold-lower"
        | "active-defrag-threshold-upper"
        | "active-defrag-cycle-min"
        | "active-defrag-cycle-max"
        | "active-defrag-max-scan-fields" => NO_DEFRAG,
        "server_cpulist" | "bio_cpulist" | "aof_rewrite_cpulist" | "bgsave_cpulist" => NO_CPU_LISTS,
        "watchdog-period" => "Sluice has no watchdog timer (a testing aid in Redis)",
        _ => return None,
    })
}

/// The line logged at start-up (and on CONFIG SET) when a parameter
/// Sluice does not act on is given a value other than its default.
pub fn warning(name: &str, value: &[u8]) -> String {
    let why = not_in_effect(name).unwrap_or("");
    format!(
        "WARNING: '{name}' is set to '{}' but Sluice does not act on it: {why}. The value is \
         stored and reported only.",
        String::from_utf8_lossy(value)
    )
}

#[cfg(test)]
mod tests {
    use super::not_in_effect;
    use crate::subsystems::config::{Slot, PARAMS};
    use std::path::Path;

    /// Parameters the code reads although Sluice does not act on them:
    /// only for a check Redis makes on them, or for a part of their
    /// meaning (the reason in `not_in_effect` says what is missing).
    const READ_NOT_IN_EFFECT: &[&str] = &[
        // load.rs: parsed as Redis parses it (refusing `yes`).
        "activedefrag",
        // config.rs: clamped on CONFIG SET as Redis does.
        "watchdog-period",
        // tls.rs: they make Redis build a TLS context, as Sluice does.
        "tls-replication",
        "tls-cluster",
        // relay.rs: the expired keys a restarted master's load feeds to
        // its replicas go out as UNLINK, as Redis's do; values are still
        // freed in place.
        "lazyfree-lazy-expire",
    ];

    /// Every source file of the workspace's crates (not their tests),
    /// without the parameter table and the code that only parses it.
    fn sources() -> String {
        fn walk(dir: &Path, out: &mut String) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let skip = ["params.rs", "doc.rs", "effect.rs", "special.rs"];
                    if p.parent().is_some_and(|d| d.ends_with("config"))
                        && skip.iter().any(|s| p.ends_with(s))
                    {
                        continue;
                    }
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    // Unit tests sit at the bottom of a module (a
                    // `mod tests;` elsewhere is a file of their own).
                    let code = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or_default();
                    out.push_str(code);
                }
            }
        }
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut out = String::new();
        for c in std::fs::read_dir(&crates).unwrap().flatten() {
            walk(&c.path().join("src"), &mut out);
        }
        out
    }

    /// Whether the code reads the parameter: by name (an inert slot, read
    /// with `get_by_name` or a helper) or through its `Config` field.
    fn is_read(src: &str, name: &str, field: bool) -> bool {
        if src.contains(&format!("\"{name}\"")) {
            return true;
        }
        if !field {
            return false;
        }
        let field = match name {
            "client-output-buffer-limit" => "obuf_normal".to_string(),
            n => n.replace('-', "_"),
        };
        let pat = format!(".{field}");
        src.match_indices(&pat).any(|(i, _)| {
            let next = src.as_bytes().get(i + pat.len()).copied().unwrap_or(b' ');
            !(next.is_ascii_alphanumeric() || next == b'_')
        })
    }

    /// The "in effect" column cannot drift from the code: a parameter
    /// listed as not in effect is read nowhere (but for the listed
    /// checks), and every other one is read somewhere.
    #[test]
    fn in_effect_list_matches_the_code() {
        let src = sources();
        let mut wrong = Vec::new();
        for p in PARAMS {
            let field = matches!(p.slot, Slot::Field(..));
            let read = is_read(&src, p.name, field);
            match not_in_effect(p.name) {
                Some(_) if read && !READ_NOT_IN_EFFECT.contains(&p.name) => {
                    wrong.push(format!("{}: listed as not in effect but read", p.name))
                }
                None if !read => wrong.push(format!("{}: in effect but read nowhere", p.name)),
                _ => {}
            }
        }
        assert!(wrong.is_empty(), "effect.rs disagrees with the code:\n{}", wrong.join("\n"));
    }
}
