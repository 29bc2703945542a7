//! The node cache's entries: bytes by name in one LMDB environment, under one byte limit, oldest
//! stored out first, shared by every process that opens the folder (`stoker.storage.SampleCache`).
//!
//! Bound here rather than through py-lmdb, which lets go of the GIL around every `put` and every
//! transaction: taking it back on an event loop's thread waits out any busy Python thread's
//! switch interval (5 ms), and a training loop is such a thread. Measured, 32 puts of 20 KB in
//! one transaction took 153 ms beside a busy thread against 0.2 ms quiet. The Python binding
//! keeps the GIL for a turn's entries (a fraction of a millisecond) and lets go of it only for
//! large ones.
//!
//! Four tables: `entries` (key -> bytes), `stamps` (key -> the order it was stored in), `order`
//! (that order -> key), so eviction takes the oldest entry without a scan, and `totals` (the
//! bytes charged, the next stamp). Every store is one write transaction: a reader in any process
//! sees an entry whole or not at all, and a process killed mid-write leaves the cache as its last
//! commit left it (LMDB's write lock is a robust mutex: the next writer takes it over).
//!
//! An entry is charged the pages it takes (LMDB keeps a value over half a page on pages of its
//! own) plus its key and bookkeeping, so the limit bounds what the cache holds on disk.

use std::path::Path;

use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, MdbError, RoTxn, RwTxn, WithoutTls};

/// Bytes charged per entry besides its value and key: node headers, its stamp rows.
const BOOKKEEPING: u64 = 96;
/// A stamp: big-endian, so the order table sorts oldest first.
type Stamp = [u8; 8];

/// How the environment is opened.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// The memory map's size: the file never grows past it.
    pub map_bytes: u64,
    /// Read transactions open at once, over every process on the node.
    pub max_readers: u32,
    /// Flush every commit to disk (where a cache from an earlier boot cannot be told apart).
    pub sync: bool,
}

/// An error of the cache's LMDB environment.
#[derive(Debug)]
pub struct CacheError(pub String);

impl std::fmt::Display for CacheError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for CacheError {}

impl From<heed::Error> for CacheError {
    fn from(error: heed::Error) -> Self {
        CacheError(error.to_string())
    }
}

/// One process's handle on a cache folder's entries.
pub struct CacheEntries {
    env: Env<WithoutTls>,
    entries: Database<Bytes, Bytes>,
    stamps: Database<Bytes, Bytes>,
    order: Database<Bytes, Bytes>,
    totals: Database<Bytes, Bytes>,
    page: u64,
}

impl CacheEntries {
    /// Open (creating) the environment in `folder`, which must exist. A process must open a
    /// folder once (LMDB's rule; a second open is an error here).
    pub fn open(folder: &Path, settings: Settings) -> Result<Self, CacheError> {
        let page = page_size::get() as u64;
        let map_bytes = settings.map_bytes.div_ceil(page) * page; // LMDB takes whole pages
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options
            .map_size(usize::try_from(map_bytes).map_err(|_| CacheError("the memory map is larger than this machine's addresses".into()))?)
            .max_dbs(4)
            .max_readers(settings.max_readers);
        let mut flags = EnvFlags::NO_READ_AHEAD; // reads are random: readahead would read pages never used
        if !settings.sync {
            flags |= EnvFlags::NO_SYNC | EnvFlags::NO_META_SYNC;
        }
        // SAFETY: `flags` only sets flags that change durability and readahead, none that makes
        // LMDB skip its locks or write through the map.
        unsafe { options.flags(flags) };
        // SAFETY: LMDB's rules for a memory map: the file is only written through LMDB (the
        // folder is the cache's own), the lock file is LMDB's (NO_LOCK is not set), and the
        // environment is opened once per process (heed refuses a second open of the same path;
        // the Python side keeps one handle per process and folder). Transactions live within
        // one call, so none is left open.
        let env = unsafe { options.open(folder) }?;
        env.clear_stale_readers()?; // slots left by killed processes would keep freed pages from reuse
        let mut transaction = env.write_txn()?;
        let entries = env.create_database(&mut transaction, Some("entries"))?;
        let stamps = env.create_database(&mut transaction, Some("stamps"))?;
        let order = env.create_database(&mut transaction, Some("order"))?;
        let totals = env.create_database(&mut transaction, Some("totals"))?;
        transaction.commit()?;
        let page = u64::from(env.stat().page_size);
        Ok(CacheEntries { env, entries, stamps, order, totals, page })
    }

    /// Bytes an entry is charged: its value in whole pages when LMDB keeps it on pages of its
    /// own (over half a page), else as is; its key; its bookkeeping.
    pub fn cost(&self, key: &[u8], length: u64) -> u64 {
        let value = if length > self.page / 2 { (length + 16).div_ceil(self.page) * self.page } else { length };
        value + key.len() as u64 + BOOKKEEPING
    }

    /// Hand `found` each of `keys`' bytes (None where missing), read in one transaction.
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K], mut found: impl FnMut(Option<&[u8]>)) -> Result<(), CacheError> {
        let transaction = self.env.read_txn()?;
        for key in keys {
            found(self.entries.get(&transaction, key.as_ref())?);
        }
        Ok(())
    }

    /// Keep each `(key, data)` in one write transaction, evicting the oldest entries to stay
    /// within `max_bytes`; an entry larger than the whole limit is not kept. Returns how many were.
    pub fn put_many<K: AsRef<[u8]>, D: AsRef<[u8]>>(&self, items: &[(K, D)], max_bytes: u64) -> Result<usize, CacheError> {
        let sized: Vec<(&[u8], &[u8], u64)> = items
            .iter()
            .map(|(key, data)| (key.as_ref(), data.as_ref()))
            .map(|(key, data)| (key, data, self.cost(key, data.len() as u64)))
            .filter(|(_, _, charged)| *charged <= max_bytes)
            .collect();
        if sized.is_empty() {
            return Ok(0);
        }
        // Freed pages can be too scattered for a large value: a second try frees an eighth more.
        for room in [0, max_bytes / 8] {
            match self.try_put_many(&sized, max_bytes - room) {
                Err(heed::Error::Mdb(MdbError::MapFull)) => continue,
                Err(error) => return Err(error.into()),
                Ok(()) => return Ok(sized.len()),
            }
        }
        Ok(0)
    }

    /// `put_many`'s transaction, evicting down to `limit`.
    fn try_put_many(&self, sized: &[(&[u8], &[u8], u64)], limit: u64) -> heed::Result<()> {
        let mut transaction = self.env.write_txn()?;
        let (mut total, mut next) = self.read_totals(&transaction)?;
        for &(key, data, charged) in sized {
            total = self.store(&mut transaction, key, data, charged, limit, total, next)?;
            next += 1;
        }
        self.totals.put(&mut transaction, b"bytes", &total.to_be_bytes())?;
        self.totals.put(&mut transaction, b"next", &next.to_be_bytes())?;
        transaction.commit()
    }

    /// In a write transaction whose entries are charged `total` bytes: drop `key`'s old entry,
    /// evict until `charged` fits within `limit`, store it with stamp `stamp`. Returns the
    /// bytes charged after.
    #[allow(clippy::too_many_arguments)] // one entry's store, called in one loop
    fn store(
        &self,
        transaction: &mut RwTxn,
        key: &[u8],
        data: &[u8],
        charged: u64,
        limit: u64,
        total: u64,
        stamp: u64,
    ) -> heed::Result<u64> {
        let mut total = total;
        if let Some(old) = self.stamps.get(transaction, key)?.map(stamp_of) {
            total = total.saturating_sub(self.drop_entry(transaction, key, &old)?);
        }
        while total + charged > limit {
            let Some((oldest, victim)) = self.order.first(transaction)?.map(|(stamp, victim)| (stamp_of(stamp), victim.to_vec())) else {
                break;
            };
            total = total.saturating_sub(self.drop_entry(transaction, &victim, &oldest)?);
        }
        let stamp = stamp.to_be_bytes();
        self.entries.put(transaction, key, data)?;
        self.stamps.put(transaction, key, &stamp)?;
        self.order.put(transaction, &stamp, key)?;
        Ok(total + charged)
    }

    /// Remove the entry `key` (stored with `stamp`); the bytes it was charged.
    fn drop_entry(&self, transaction: &mut RwTxn, key: &[u8], stamp: &Stamp) -> heed::Result<u64> {
        let charged = self.entries.get(transaction, key)?.map(|value| self.cost(key, value.len() as u64)).unwrap_or(0);
        self.entries.delete(transaction, key)?;
        self.stamps.delete(transaction, key)?;
        self.order.delete(transaction, stamp)?;
        Ok(charged)
    }

    fn read_totals(&self, transaction: &RoTxn) -> heed::Result<(u64, u64)> {
        let number = |value: Option<&[u8]>| value.map(|bytes| u64::from_be_bytes(stamp_of(bytes))).unwrap_or(0);
        Ok((number(self.totals.get(transaction, b"bytes")?), number(self.totals.get(transaction, b"next")?)))
    }

    /// Bytes charged to the entries held now, for all processes.
    pub fn size(&self) -> Result<u64, CacheError> {
        let transaction = self.env.read_txn()?;
        Ok(self.read_totals(&transaction)?.0)
    }

    /// Entries held now, for all processes.
    pub fn len(&self) -> Result<u64, CacheError> {
        let transaction = self.env.read_txn()?;
        Ok(self.entries.len(&transaction)?)
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> Result<bool, CacheError> {
        Ok(self.len()? == 0)
    }
}

/// The first 8 bytes of a stored stamp or total (shorter: zero-padded; the tables are the
/// cache's own, but a damaged file must not panic).
fn stamp_of(bytes: &[u8]) -> Stamp {
    let mut stamp = [0u8; 8];
    let length = bytes.len().min(8);
    stamp[8 - length..].copy_from_slice(&bytes[..length]);
    stamp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("stoker-cache-entries-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    fn settings(max_bytes: u64) -> Settings {
        Settings { map_bytes: 2 * max_bytes + (64 << 20), max_readers: 126, sync: false }
    }

    fn read(cache: &CacheEntries, keys: &[&[u8]]) -> Vec<Option<Vec<u8>>> {
        let mut found = Vec::new();
        cache.get_many(keys, |value| found.push(value.map(<[u8]>::to_vec))).unwrap();
        found
    }

    #[test]
    fn the_oldest_entries_go_first_and_the_limit_holds() {
        let path = folder("oldest");
        let cache = CacheEntries::open(&path, settings(100 * 1024)).unwrap();
        for number in 0..40u32 {
            let key = format!("s{number}");
            assert_eq!(cache.put_many(&[(key.as_bytes(), vec![number as u8; 10_000])], 100 * 1024).unwrap(), 1);
            assert!(cache.size().unwrap() <= 100 * 1024);
        }
        let kept = read(&cache, &[b"s0", b"s39"]);
        assert_eq!(kept[0], None, "the oldest went first");
        assert_eq!(kept[1], Some(vec![39u8; 10_000]));
        assert!(cache.len().unwrap() < 40);
        drop(cache);
        let _ = std::fs::remove_dir_all(path);
    }

    #[test]
    fn storing_a_key_again_replaces_it_and_its_charge() {
        let path = folder("again");
        let cache = CacheEntries::open(&path, settings(1 << 20)).unwrap();
        cache.put_many(&[(b"a".as_slice(), vec![1u8; 5000])], 1 << 20).unwrap();
        let once = cache.size().unwrap();
        cache.put_many(&[(b"a".as_slice(), vec![2u8; 5000])], 1 << 20).unwrap();
        assert_eq!(cache.size().unwrap(), once);
        assert_eq!(cache.len().unwrap(), 1);
        assert_eq!(read(&cache, &[b"a"])[0], Some(vec![2u8; 5000]));
        drop(cache);
        let _ = std::fs::remove_dir_all(path);
    }

    #[test]
    fn an_entry_larger_than_the_limit_is_not_kept() {
        let path = folder("larger");
        let cache = CacheEntries::open(&path, settings(64 * 1024)).unwrap();
        assert_eq!(cache.put_many(&[(b"big".as_slice(), vec![0u8; 70 * 1024])], 64 * 1024).unwrap(), 0);
        assert!(cache.is_empty().unwrap());
        drop(cache);
        let _ = std::fs::remove_dir_all(path);
    }

    #[test]
    fn a_short_stamp_reads_as_a_number_without_panicking() {
        assert_eq!(u64::from_be_bytes(stamp_of(&[1, 2])), 258);
        assert_eq!(u64::from_be_bytes(stamp_of(&[])), 0);
    }
}
