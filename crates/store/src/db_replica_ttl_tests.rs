//! A writable replica expires the keys its own clients gave a TTL (Redis's
//! `slaveKeysWithExpire`), and leaves its master's keys, whether from its
//! stream or a loaded snapshot, to the master.

use super::*;

fn expire_pass(store: &Store, now: i64) -> Vec<(usize, Vec<u8>)> {
    let mut gone = Vec::new();
    store.expire_replica_keys(0, 1, now, &mut |db, k| gone.push((db, k.to_vec())));
    gone
}

#[test]
fn a_replica_expires_what_its_own_clients_gave_a_ttl() {
    let store = Store::new(16, 64);
    store.set_replica(true);
    let mut l = Locks::new(&store, 1000);
    l.insert(3, b"mine", Value::from_arg(b"v"), 1500, 0);
    l.insert(3, b"plain", Value::from_arg(b"v"), NO_EXPIRE, 0);
    l.insert(3, b"later", Value::from_arg(b"v"), NO_EXPIRE, 0);
    assert!(l.set_expire(3, b"later", 1800));
    drop(l);

    assert!(expire_pass(&store, 1400).is_empty(), "nothing is due yet");
    assert_eq!(expire_pass(&store, 1600), vec![(3, b"mine".to_vec())]);
    assert_eq!(expire_pass(&store, 2000), vec![(3, b"later".to_vec())]);
    assert_eq!(store.stats().expired_keys, 2);
    assert_eq!(store.db_size(3), (1, 0), "the key without a TTL stays");
    let mut l = Locks::new(&store, 2000);
    assert!(l.get(3, b"plain").is_some());
}

#[test]
fn a_replica_leaves_its_masters_keys_and_loaded_keys_to_the_master() {
    let store = Store::new(1, 64);
    store.set_replica(true);
    let mut l = Locks::new(&store, 1000);
    l.obey(Deadlines::Master);
    l.insert(0, b"from-master", Value::from_arg(b"v"), 1500, 0);
    drop(l);
    // An RDB from the master is loaded through stripe guards.
    store.lock_stripe(0, store.stripe_of(b"loaded") as usize).insert_loaded(
        b"loaded",
        Value::from_arg(b"v"),
        1500,
        0,
    );
    assert!(expire_pass(&store, 5000).is_empty());
    assert_eq!(store.db_size(0), (2, 2));
}

#[test]
fn a_replica_forgets_a_key_that_lost_its_ttl_or_went() {
    let store = Store::new(1, 64);
    store.set_replica(true);
    let mut l = Locks::new(&store, 1000);
    l.insert(0, b"persisted", Value::from_arg(b"v"), 1500, 0);
    l.insert(0, b"deleted", Value::from_arg(b"v"), 1500, 0);
    assert!(l.set_expire(0, b"persisted", NO_EXPIRE));
    assert!(l.remove(0, b"deleted").is_some());
    drop(l);
    assert!(expire_pass(&store, 1200).is_empty());
    // The same name now comes from the master, with a TTL of its own: it
    // is the master's to expire. Redis's pass forgets a noted key it finds
    // gone or without a TTL; ours skips a stripe left without TTLs, so the
    // stripe forgets its notes when it gets a TTL again.
    let mut l = Locks::new(&store, 1200);
    l.obey(Deadlines::Master);
    l.insert(0, b"deleted", Value::from_arg(b"w"), 1500, 0);
    drop(l);
    assert!(expire_pass(&store, 5000).is_empty());
    assert_eq!(store.db_size(0), (2, 1));
}

#[test]
fn a_master_tracks_nothing_for_the_replica_pass() {
    let store = Store::new(1, 64);
    let mut l = Locks::new(&store, 1000);
    l.insert(0, b"k", Value::from_arg(b"v"), 1500, 0);
    drop(l);
    store.set_replica(true);
    assert!(expire_pass(&store, 5000).is_empty());
}
