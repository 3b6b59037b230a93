//! Migration into the store under test: a redb store with every kind of record (removed
//! ids, trimmed events, an audit log with an archived segment) is copied into it and back
//! out into a second redb store, each copy checked record for record by the migration
//! itself; the audit import refuses a store that has a log already.

use std::sync::Arc;

use super::Fixture;
use crate::migrate::migrate;
use crate::store::{RedbStore, Store};

/// redb → this store → redb: the same records, ids and audit chain each time.
pub(crate) fn a_store_migrated_into_this_one_and_out_again_is_the_same(fixture: &dyn Fixture) {
    let (_source_dir, source) = crate::migrate::tests::source();
    let here: Arc<dyn Store> = Arc::from(fixture.open());
    let copied = migrate(source.as_ref(), here.as_ref(), "the store under test").unwrap();
    assert_eq!((copied.tasks, copied.events, copied.last_id), (5, 3, 6));
    assert_eq!(
        here.load().unwrap().last_task_id,
        6,
        "a removed id stays taken"
    );
    let back_dir = tempfile::tempdir().unwrap();
    let back = RedbStore::open(&back_dir.path().join(crate::STORE_FILE)).unwrap();
    let again = migrate(here.as_ref(), &back, "the second redb store").unwrap();
    assert_eq!(again, copied);
    crate::migrate::check::same(source.as_ref(), &back).unwrap();
    // A second import of the audit log into the now non-empty store is refused.
    let (entries, head) = crate::migrate::audit_of(source.as_ref()).unwrap();
    let refused = here.import_audit(&entries, &[], &head).unwrap_err();
    assert!(
        refused.to_string().contains("already has an audit log"),
        "{refused}"
    );
}
