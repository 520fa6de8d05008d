//! Client-side caching (`CLIENT TRACKING`) with several real connections,
//! against redis-server 7.0 and Sluice (two threads): the invalidation
//! messages each client receives, and when, must be the same (transcript
//! format in `testkit::transcript`; `_` lines hide replies that name
//! client ids, which differ between the servers).

use std::path::Path;

fn check(script: &str) {
    testkit::transcript::check(Path::new(env!("CARGO_BIN_EXE_sluice-server")), script);
}

#[test]
fn default_mode_invalidates_keys_read() {
    check(
        "A_ HELLO 3
         A: CLIENT TRACKING on
         A: GET k
         A: MGET a b
         B: SET k v
         A? 50
         B: SET k w
         A? 50
         A: GET k
         B: MSET a 1 b 2 c 3
         A? 50
         B: SET c 4
         A? 50
         A: GET k
         A: SET k mine
         A? 50
         A: GET k
         A: MULTI
         A: SET k v2
         A: GET k
         A: EXEC
         A? 50
         A: GET k
         A: HGET h f
         B: HSET h f v
         A? 50
         A: GET k
         A: CLIENT TRACKING off
         B: SET k x
         A? 50
         A: CLIENT TRACKING on
         B: SET k y
         A? 50",
    );
}

/// Redis invalidates a key when it is written, so a read inside a
/// transaction or script after the unit's own write leaves the key
/// tracked and sends nothing (unless the client tracked it before, or a
/// later write in the unit changes it again).
#[test]
fn reads_after_the_units_own_writes() {
    check(
        "A_ HELLO 3
         A: CLIENT TRACKING on
         A: DEBUG SET-ACTIVE-EXPIRE 0
         A: MULTI
         A: MSET x 1 y 2
         A: PEXPIRE y 100
         A: GET y
         A: EXEC
         A? 50
         ~ 120
         A: MGET x y
         A? 50
         A: MSET a 1 b 2
         A: GET a
         A: MULTI
         A: INCR a
         A: GET b
         A: EXEC
         A? 50
         A: MULTI
         A: SET k 1
         A: GET k
         A: SET k 2
         A: EXEC
         A? 50
         A: MULTI
         A: SET j 1
         A: GET j
         A: EXEC
         A? 50
         B: SET j 2
         A? 50
         A: EVAL redis.call('set',KEYS[1],'1');return(redis.call('get',KEYS[1])) 1 s
         A? 50
         B: SET s 2
         A? 50
         A: DEBUG SET-ACTIVE-EXPIRE 1",
    );
}

#[test]
fn expiry_deletion_and_flush_invalidate() {
    check(
        "A_ HELLO 3
         A: CLIENT TRACKING on
         B: SET e v PX 1
         A: GET x
         A: GET d
         B: SET d v
         A? 50
         A: GET d
         B: DEL d
         A? 50
         ~ 10
         A: GET e
         B: SET x 1
         A? 50
         A: GET x
         B: FLUSHALL
         A? 50
         A: GET x
         B: SET x 2
         A? 50
         A: GET x
         B: FLUSHDB
         A? 50",
    );
}

#[test]
fn noloop_optin_and_optout() {
    check(
        "A_ HELLO 3
         A: CLIENT TRACKING on NOLOOP
         A: GET k
         A: SET k mine
         A? 50
         A: GET k
         B: SET k theirs
         A? 50
         A: CLIENT TRACKING off
         A: CLIENT TRACKING on OPTIN
         A: GET skipped
         A: CLIENT CACHING yes
         A: GET cached
         A: GET notcached
         B: MSET skipped 1 cached 1 notcached 1
         A? 50
         A: CLIENT CACHING yes
         A: MULTI
         A: GET t1
         A: GET t2
         A: EXEC
         B: MSET t1 1 t2 2
         A? 50
         A: CLIENT TRACKING off
         A: CLIENT TRACKING on OPTOUT
         A: GET o1
         A: CLIENT CACHING no
         A: GET o2
         B: MSET o1 1 o2 2
         A? 50",
    );
}

#[test]
fn broadcast_mode_with_prefixes() {
    check(
        "A_ HELLO 3
         A: CLIENT TRACKING on BCAST PREFIX user: PREFIX item:
         B: SET user:1 a
         A? 50
         B: MSET item:2 x user:3 y other z item:1 w
         A? 50
         B: SET other q
         A? 50
         A: SET user:9 mine
         A? 50
         C_ HELLO 3
         C: CLIENT TRACKING on BCAST NOLOOP
         C: SET user:5 c
         C? 50
         A? 50
         B: SET user:5 d
         C? 50
         A? 50
         B: MULTI
         B: SET item:b 1
         B: SET item:a 2
         B: SET item:b 3
         B: EXEC
         A? 50
         C? 50
         B: FLUSHALL
         A? 50
         C? 50",
    );
}

#[test]
fn redirect_to_a_resp2_subscriber_and_broken_redirects() {
    check(
        "@ids
         R> SUBSCRIBE __redis__:invalidate
         R? 50
         A: CLIENT TRACKING on REDIRECT @R
         A: CLIENT GETREDIR
         A: GET k
         B: SET k v
         R? 50
         A? 50
         A: GET k
         B: FLUSHALL
         R? 50
         A: CLIENT TRACKING off
         T_ HELLO 3
         A: CLIENT TRACKING on REDIRECT @T
         A: GET j
         B: SET j 1
         T? 50
         A? 50
         N: PING
         A: CLIENT TRACKING on REDIRECT @N
         A: GET j
         B: SET j 2
         N? 50
         A: PING
         C_ HELLO 3
         C: CLIENT TRACKING on REDIRECT @T
         C: GET z
         T!
         B: SET z 1
         C? 50
         C: CLIENT TRACKINGINFO",
    );
}

/// A redirection target that sent QUIT is gone for the clients tracking
/// into it as soon as its `+OK` is read: a write right after reports the
/// redirection broken (Redis frees the quitting client right after the
/// write). Bug: the target's thread had not torn the connection down
/// yet, the invalidation went to it, and the tracking client waited for
/// its `tracking-redir-broken` forever (Redis's unit/tracking "CLIENT
/// TRACKINGINFO provides reasonable results when tracking redir broken"
/// hung so once).
#[test]
fn a_redirection_target_that_quit_is_broken_at_once() {
    check(
        "@ids
         C_ HELLO 3
         T: PING
         C: CLIENT TRACKING on REDIRECT @T
         C: GET z
         T: QUIT
         B: SET z 1
         C? 50
         C: CLIENT TRACKINGINFO",
    );
}
