//! A database's stripes come with its first use: what an empty database
//! costs, and the gate that orders their allocation with commands that
//! lock a whole database and with snapshots.

use super::*;

fn key_in(store: &Store, db: usize, key: &[u8]) -> u32 {
    store.global_id(db, store.stripe_of(key))
}

#[test]
fn an_empty_server_allocates_no_database_until_one_is_used() {
    let store = Store::new(16, 1024);
    assert!((0..16).all(|db| !store.db_allocated(db)));
    // Reading sizes, statistics and samples of unused databases does
    // not allocate them.
    assert_eq!(store.db_size(3), (0, 0));
    assert_eq!(store.stats().expired_keys, 0);
    assert_eq!(store.sample_keys(3, false, 5, &mut |_, _, _| {}), 0);
    let l = Locks::new(&store, 0);
    assert_eq!(l.counts(key_in(&store, 3, b"k")), StripeCounts::default());
    assert_eq!(l.db_counts(3), StripeCounts::default());
    drop(l);
    assert!((0..16).all(|db| !store.db_allocated(db)));

    let mut l = Locks::new(&store, 0);
    l.insert(9, b"k", Value::from_arg(b"v"), NO_EXPIRE, 0);
    drop(l);
    let used: Vec<usize> = (0..16).filter(|&db| store.db_allocated(db)).collect();
    assert_eq!(used, vec![9]);
    assert_eq!(store.db_size(9), (1, 0));
    // The job namespace's stripe is there from the start.
    assert_eq!(store.lock_stripe(store.databases(), 0).len(), 0);
}

#[test]
fn locking_an_unused_database_whole_holds_its_gate_and_allocates_nothing() {
    let store = Store::new(4, 16);
    let mut whole = Locks::new(&store, 0);
    for db in 0..4 {
        whole.acquire_db(db).unwrap();
    }
    assert!(whole.db_absent(2));
    assert!((0..4).all(|db| !store.db_allocated(db)));
    // Nobody can give the database stripes meanwhile: a command that may
    // not wait is refused, as for a held stripe.
    let mut other = Locks::new(&store, 0);
    assert_eq!(other.try_acquire(&mut [key_in(&store, 2, b"k")]), Err(LockOrder));
    assert!(!store.db_allocated(2));
    drop(other);
    // The holder itself may fill it (SWAPDB, a script selecting it).
    whole.allocate_db(2).unwrap();
    whole.insert(2, b"k", Value::from_arg(b"v"), NO_EXPIRE, 0);
    assert!(whole.get(2, b"k").is_some());
    drop(whole);
    let mut other = Locks::new(&store, 0);
    other.try_acquire(&mut [key_in(&store, 2, b"k")]).unwrap();
    assert!(other.get(2, b"k").is_some());
}

#[test]
fn a_database_allocated_after_another_locked_it_whole_is_locked_as_usual() {
    let store = Store::new(4, 16);
    let mut first = Locks::new(&store, 0);
    first.insert(1, b"a", Value::from_arg(b"v"), NO_EXPIRE, 0);
    drop(first);
    let mut whole = Locks::new(&store, 0);
    whole.acquire_db(1).unwrap();
    assert!(!whole.db_absent(1));
    // Every stripe of it is held.
    let mut other = Locks::new(&store, 0);
    assert_eq!(other.try_acquire(&mut [key_in(&store, 1, b"zz")]), Err(LockOrder));
}

#[test]
fn a_stripe_below_a_held_gate_is_taken_out_of_order() {
    let store = Store::new(4, 16);
    let mut l = Locks::new(&store, 0);
    l.acquire_db(3).unwrap();
    // Database 1 comes before database 3's gate: taken only if free now
    // (it is), never waited for.
    l.acquire(&mut [key_in(&store, 1, b"k")]).unwrap();
    assert!(store.db_allocated(1));
    let mut other = Locks::new(&store, 0);
    other.acquire(&mut [key_in(&store, 0, b"k")]).unwrap();
    drop(other);
    let mut busy = Locks::new(&store, 0);
    busy.acquire(&mut [key_in(&store, 0, b"x")]).unwrap();
    assert_eq!(l.acquire(&mut [key_in(&store, 0, b"x")]), Err(LockOrder));
}

/// Counts the stripes a snapshot captures, and the keys in them.
#[derive(Default)]
struct Count(std::sync::Mutex<(usize, usize)>);

impl SnapshotHook for Count {
    fn capture(&self, _db: usize, stripe: &Stripe) {
        let mut c = self.0.lock().unwrap();
        c.0 += 1;
        c.1 += stripe.len();
    }
}

#[test]
fn a_database_first_used_after_a_snapshot_s_instant_is_not_in_it() {
    let store = Store::new(2, 4);
    let mut l = Locks::new(&store, 0);
    l.insert(0, b"before", Value::from_arg(b"v"), NO_EXPIRE, 0);
    drop(l);
    let hook = Arc::new(Count::default());
    let sizes = store.begin_snapshot(hook.clone());
    assert_eq!(sizes, vec![(1, 0), (0, 0)]);
    // Written after the instant, in a database that had no stripes then.
    let mut l = Locks::new(&store, 0);
    l.insert(1, b"after", Value::from_arg(b"v"), NO_EXPIRE, 0);
    drop(l);
    for id in 0..store.total_stripes() {
        assert!(store.try_snapshot_stripe(id, std::time::Duration::from_millis(10)));
    }
    store.end_snapshot();
    let (stripes, keys) = *hook.0.lock().unwrap();
    assert_eq!((stripes, keys), (4, 1), "database 0's four stripes, and its one key");
}

/// A stripe whose holder took it after the snapshot's instant was
/// captured by that lock: the saver passes over it while it is still
/// held (a busy script keeps its stripes), and the capture is settled.
#[test]
fn a_stripe_held_since_the_instant_is_passed_over_not_waited_for() {
    let store = Store::new(1, 4);
    let mut l = Locks::new(&store, 0);
    l.insert(0, b"k", Value::from_arg(b"v"), NO_EXPIRE, 0);
    drop(l);
    let hook = Arc::new(Count::default());
    store.begin_snapshot(hook.clone());
    let mut holder = Locks::new(&store, 0);
    holder.acquire(&mut [key_in(&store, 0, b"k")]).unwrap();
    assert_eq!(*hook.0.lock().unwrap(), (1, 1), "captured when the holder took it");
    for id in 0..store.total_stripes() {
        assert!(store.try_snapshot_stripe(id, std::time::Duration::from_millis(10)), "stripe {id}");
    }
    assert!(store.snapshot_settled());
    store.end_snapshot();
    drop(holder);
    assert_eq!(*hook.0.lock().unwrap(), (4, 1), "every stripe once, the held one by its holder");
}
