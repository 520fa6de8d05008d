//! Redis Cluster's key → slot rule (CRC16/XMODEM of the key, or of its
//! first non-empty `{hash tag}`, modulo 16384) and which argument of a
//! command is the key that routes it. Pure functions, no I/O.

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

const fn crc16_table() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut b = 0;
        while b < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            b += 1;
        }
        t[i] = crc;
        i += 1;
    }
    t
}

static CRC16: [u16; 256] = crc16_table();

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), as Redis's `crc16`.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| (crc << 8) ^ CRC16[(((crc >> 8) as u8) ^ b) as usize])
}

/// The slot of `key`: the bytes between the first `{` and the next `}`
/// when that is non-empty, else the whole key (Redis's `keyHashSlot`).
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) & (SLOTS - 1)
}

/// Commands that name no key: sent to any node.
const KEYLESS: &[&str] = &[
    "ACL",
    "ASKING",
    "AUTH",
    "BGREWRITEAOF",
    "BGSAVE",
    "CLIENT",
    "CLUSTER",
    "COMMAND",
    "CONFIG",
    "DBSIZE",
    "DEBUG",
    "DISCARD",
    "ECHO",
    "EXEC",
    "FAILOVER",
    "FLUSHALL",
    "FLUSHDB",
    "FUNCTION",
    "HELLO",
    "INFO",
    "KEYS",
    "LASTSAVE",
    "LATENCY",
    "LOLWUT",
    "MIGRATE",
    "MODULE",
    "MONITOR",
    "MULTI",
    "PING",
    "PSUBSCRIBE",
    "PUBLISH",
    "PUBSUB",
    "PUNSUBSCRIBE",
    "QUIT",
    "RANDOMKEY",
    "READONLY",
    "READWRITE",
    "REPLICAOF",
    "RESET",
    "ROLE",
    "SAVE",
    "SCAN",
    "SCRIPT",
    "SELECT",
    "SHUTDOWN",
    "SLAVEOF",
    "SLOWLOG",
    "SUBSCRIBE",
    "SWAPDB",
    "TIME",
    "UNSUBSCRIBE",
    "UNWATCH",
    "WAIT",
    "WAITAOF",
];

fn is(name: &[u8], s: &str) -> bool {
    name.eq_ignore_ascii_case(s.as_bytes())
}

/// The key that decides where `args` (a command and its arguments) is
/// routed: the first key Redis's key specs name for the common commands
/// (`EVAL`'s first declared key, `XREAD`'s first stream, …), `None` for
/// a command without keys. A multi-key command whose keys span slots is
/// routed by its first key and answered `-CROSSSLOT` by the server.
pub fn routing_key<A: AsRef<[u8]>>(args: &[A]) -> Option<&[u8]> {
    let name = args.first()?.as_ref();
    let arg = |i: usize| args.get(i).map(|a| a.as_ref());
    let numkeys_then_key = |at: usize| {
        let n = resp::parse_i64(arg(at)?)?;
        if n > 0 {
            arg(at + 1)
        } else {
            None
        }
    };
    if KEYLESS.iter().any(|k| is(name, k)) {
        return None;
    }
    if ["EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"].iter().any(|k| is(name, k))
    {
        return numkeys_then_key(2);
    }
    if ["LMPOP", "ZMPOP", "SINTERCARD", "ZINTERCARD", "ZDIFF", "ZUNION", "ZINTER"]
        .iter()
        .any(|k| is(name, k))
    {
        return numkeys_then_key(1);
    }
    if is(name, "BLMPOP") || is(name, "BZMPOP") {
        return numkeys_then_key(2);
    }
    if is(name, "XREAD") || is(name, "XREADGROUP") {
        let at = args.iter().position(|a| is(a.as_ref(), "STREAMS"))?;
        return arg(at + 1);
    }
    if ["OBJECT", "MEMORY", "XINFO", "XGROUP"].iter().any(|k| is(name, k)) {
        return arg(2);
    }
    arg(1)
}

/// The slot `args` is routed by, `None` for a keyless command.
pub fn command_slot<A: AsRef<[u8]>>(args: &[A]) -> Option<u16> {
    routing_key(args).map(key_slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_cluster_spec_values() {
        // The cluster specification's check value and examples.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"user1000"));
        // An empty tag hashes the whole key; only the first `{` counts.
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b""), 0);
    }

    #[test]
    fn routing_keys_follow_the_key_specs() {
        let k = |a: &[&str]| routing_key(a).map(|k| String::from_utf8_lossy(k).into_owned());
        assert_eq!(k(&["GET", "a"]).as_deref(), Some("a"));
        assert_eq!(k(&["ping"]), None);
        assert_eq!(k(&["EVAL", "return 1", "0"]), None);
        assert_eq!(k(&["evalsha", "x", "2", "b", "c"]).as_deref(), Some("b"));
        assert_eq!(k(&["XREAD", "COUNT", "2", "STREAMS", "s", "0"]).as_deref(), Some("s"));
        assert_eq!(k(&["BLMPOP", "0", "1", "l", "LEFT"]).as_deref(), Some("l"));
        assert_eq!(k(&["ZUNION", "2", "z1", "z2"]).as_deref(), Some("z1"));
        assert_eq!(k(&["OBJECT", "ENCODING", "o"]).as_deref(), Some("o"));
        assert_eq!(k(&["MSET", "m", "1"]).as_deref(), Some("m"));
        assert_eq!(k(&["CLUSTER", "SLOTS"]), None);
    }
}
