//! The node cache's entries: bytes by name under one byte limit, oldest stored out first, shared
//! by every process that opens the folder (`stoker.storage.SampleCache`), in files read with
//! explicit, bounds-checked I/O: no byte of them can crash a reader.
//!
//! LMDB held them before, and LMDB trusts its file: it follows the page numbers it finds through
//! its memory map, so a damaged `data.mdb` (1 MB of random bytes) killed the reading process with
//! SIGSEGV in 2 of 8 trials, every rank of the node that opened it. Here nothing is mapped. Each
//! read is a `pread` into a buffer no larger than the file, and every byte read is checked before
//! use: the state's two copies by their CRC-32 (the newer whole one used), a slot by the record it
//! points to, a record by its magic, its name and the CRC-32 of its name and bytes. What fails is
//! a miss (fetched again), or, for the state, a store emptied and made again (`notices` says so).
//!
//! The layout (`cache_layout`): records appended to segments, `log-<number>`, each up to a 32nd of
//! the limit; the oldest segment is removed whole when the limit needs room (eviction oldest
//! stored first, a 32nd at a time), and a slot of the index (`cache_index`) points to each name's
//! record. A store is one write under the node's writer lock (`flock` on `lock`): records first,
//! then slots, then the state (`cache_writes`). Readers take no lock: a reader in any process sees an entry whole
//! or not at all (a record is checked whole), and a writer killed mid-store leaves bytes past the
//! state's end that the next writer overwrites, or slots whose records fail their checks.
//!
//! Files are opened relative to the folder's descriptor, never through a link (`cache_files`),
//! and the only names removed are the store's own (segments, `index.new`) and the LMDB files an
//! earlier stoker made (`data.mdb`, `lock.mdb`).

use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::cache_files::{read_at, size_of, write_at, Folder, Locked};
use super::cache_index::{self, Probe};
use super::cache_layout::{
    check_record, name_hash, Record, State, LONGEST_NAME, RECORD_HEADER, SLOTS_AT, SLOT_BYTES, STATE_BYTES, STATE_USED,
};

/// Files an earlier stoker kept its node cache in (LMDB): removed, never read.
const EARLIER_FILES: [&str; 2] = ["data.mdb", "lock.mdb"];

/// How the store is opened.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Flush every store to disk (where a cache from an earlier boot cannot be told apart).
    pub sync: bool,
    /// This boot's id (Linux): a store written in another boot is emptied when opened.
    pub boot: Option<String>,
}

/// An error of the cache's files.
#[derive(Debug)]
pub struct CacheError(pub String);

impl std::fmt::Display for CacheError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for CacheError {}

impl From<io::Error> for CacheError {
    fn from(error: io::Error) -> Self {
        CacheError(error.to_string())
    }
}

/// Where an entry's record is: found by `locate_many`, read by `read_located`.
pub struct Located {
    segment: Arc<File>,
    offset: u64,
    /// Bytes of the entry's value (the buffer `read_located` fills).
    pub length: usize,
}

/// The segments this process has open, of one store.
#[derive(Default)]
struct Open {
    store: u64,
    files: HashMap<u64, (Arc<File>, u64)>, // number -> (file, its size when last looked at)
}

/// One process's handle on a cache folder's entries. Shared by threads: the index file is
/// swapped under a lock, the open segments are behind a mutex, and stores are one at a time
/// (a mutex, then the node's `flock`).
pub struct CacheEntries {
    pub(super) folder: Folder,
    pub(super) lock: File,
    pub(super) index: RwLock<Arc<File>>,
    open: Mutex<Open>,
    pub(super) writer: Mutex<Writing>,
    pub(super) settings: Settings,
    damaged: AtomicU64,
    notices: Mutex<Vec<Notice>>,
}

/// The segment this process writes: (store, number, file).
pub(super) type Writing = Option<(u64, u64, Arc<File>)>;

/// What to tell the user: how loud (`"info"` or `"warning"`), and what.
pub type Notice = (&'static str, String);

fn fresh_state() -> State {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(std::process::id().into());
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |time| time.as_nanos()));
    State { sequence: 1, store: hasher.finish(), capacity: cache_index::capacity_for(0), ..State::default() }
}

pub(super) fn segment_name(number: u64) -> String {
    format!("log-{number:016x}")
}

fn is_segment_name(name: &str) -> bool {
    name.len() == 20 && name.starts_with("log-") && name[4..].bytes().all(|byte| byte.is_ascii_hexdigit())
}

/// The state `index` holds, or None when neither copy passes its checks or (`sized`) the file is
/// shorter than its slots. Readers skip the size (a slot read past the end reads as empty: a
/// miss), which saves them a system call a read; opening and writing check it.
pub(super) fn read_state(index: &File, sized: bool) -> io::Result<Option<State>> {
    let mut both = vec![0u8; STATE_BYTES as usize + STATE_USED];
    let read = read_at(index, &mut [&mut both], 0)?;
    match State::newest(&both[..read]) {
        Some(state) if !sized || size_of(index)? >= SLOTS_AT + state.capacity * SLOT_BYTES => Ok(Some(state)),
        _ => Ok(None),
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl CacheEntries {
    /// Open the store in the folder of `descriptor` (duplicated), making it when missing, and
    /// emptying it (with a notice saying why) when it was written in another boot or its state
    /// fails its checks.
    pub fn open(descriptor: RawFd, settings: Settings) -> Result<Self, CacheError> {
        let folder = Folder::from_descriptor(descriptor)?;
        let lock_file = Self::own_file(&folder, "lock")?;
        let index = {
            let _locked = Locked::exclusive(&lock_file)?;
            Self::opened(&folder, &settings)?
        };
        Ok(CacheEntries {
            folder,
            lock: lock_file,
            index: RwLock::new(Arc::new(index.0)),
            open: Mutex::new(Open::default()),
            writer: Mutex::new(None),
            settings,
            damaged: AtomicU64::new(0),
            notices: Mutex::new(index.1),
        })
    }

    /// The file `name` of the store's own, made when missing; a link or a FIFO in its place is
    /// removed (the name, never a link's target) and the file made.
    fn own_file(folder: &Folder, name: &str) -> io::Result<File> {
        match folder.open(name, true, true) {
            Err(error) if error.raw_os_error() == Some(libc::ELOOP) || error.kind() == io::ErrorKind::InvalidData => {
                folder.remove(name)?;
                folder.open(name, true, true)
            }
            opened => opened,
        }
    }

    /// The index, checked under the writers' lock: kept when whole and of this boot, else the
    /// store is made anew. Returns it and what to tell the user (why it was made anew).
    fn opened(folder: &Folder, settings: &Settings) -> Result<(File, Vec<Notice>), CacheError> {
        let mut notices = Vec::new();
        let mut why = None;
        let names = folder.names()?;
        let earlier: Vec<&str> = EARLIER_FILES.into_iter().filter(|name| names.iter().any(|found| found == name)).collect();
        for name in &earlier {
            folder.remove(name)?;
        }
        if !earlier.is_empty() {
            notices.push(("info", format!("{} of an earlier stoker's cache (LMDB) removed, never read", earlier.join(" and "))));
        }
        let boot = Self::boot_mark(folder)?;
        let index = match folder.open("index", true, false) {
            Ok(index) => Some(index),
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) if matches!(error.raw_os_error(), Some(libc::ELOOP)) || error.kind() == io::ErrorKind::InvalidData => {
                why = Some("its index is not a regular file: emptied".into());
                None
            }
            Err(error) => return Err(error.into()),
        };
        if let Some(index) = index {
            match read_state(&index, true)? {
                Some(state) if state.superseded => why = Some("its index is marked replaced: emptied".into()),
                Some(_) if settings.boot.is_some() && boot != settings.boot => {
                    notices.push(("info", "written before this machine last started: emptied (its last writes may not be whole)".into()))
                }
                Some(_) => return Ok((index, notices)),
                None => why = Some("its index fails its checks (damaged): emptied and made again".into()),
            }
        }
        if let Some(why) = why {
            notices.push(("warning", why));
        }
        let index = Self::make_anew(folder, settings)?;
        Ok((index, notices))
    }

    /// The boot the store was written in (its `boot` file, 64 bytes at most), or None.
    fn boot_mark(folder: &Folder) -> io::Result<Option<String>> {
        let file = match folder.open("boot", false, false) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(_) => return Ok(None), // a link or a folder there: not a mark; `make_anew` replaces it
        };
        let mut mark = [0u8; 64];
        let read = read_at(&file, &mut [&mut mark], 0)?;
        Ok(std::str::from_utf8(&mark[..read]).ok().map(|text| text.trim().to_owned()))
    }

    /// Remove the store's files and make an empty one (under the writers' lock).
    pub(super) fn make_anew(folder: &Folder, settings: &Settings) -> Result<File, CacheError> {
        for name in folder.names()? {
            if is_segment_name(&name) || name == "index.new" {
                folder.remove(&name)?;
            }
        }
        let index = cache_index::create(folder, "index.new", &fresh_state())?;
        if let Some(boot) = &settings.boot {
            let mark = folder.create_new("boot.new")?;
            write_at(&mark, &[boot.as_bytes()], 0)?;
            folder.rename("boot.new", "boot")?;
        }
        if settings.sync {
            index.sync_data()?;
        }
        folder.rename("index.new", "index")?;
        Ok(index)
    }

    /// What happened that the user should be told (the store emptied, damaged entries), once.
    pub fn notices(&self) -> Vec<Notice> {
        let mut notices = std::mem::take(&mut *lock(&self.notices));
        let damaged = self.damaged.swap(0, Ordering::Relaxed);
        if damaged > 0 {
            notices.push(("warning", format!("{damaged} entries failed their checks (damaged, or left by a writer that died mid-store): read as missing, fetched again")));
        }
        notices
    }

    pub(super) fn notice(&self, text: String) {
        lock(&self.notices).push(("warning", text));
    }

    /// The current index and its state, for a reader. An index replaced by a writer's rebuild is
    /// opened again by name; one whose state fails its checks is repaired (made anew).
    fn current(&self) -> Result<(Arc<File>, State), CacheError> {
        for _ in 0..4 {
            let index = self.index.read().map_err(|_| CacheError("a thread panicked holding the index".into()))?.clone();
            match read_state(&index, false)? {
                Some(state) if !state.superseded => return Ok((index, state)),
                Some(_) => self.reopen_index()?,
                None => self.repair(&index)?,
            }
        }
        Err(CacheError("its index kept changing while being read".into()))
    }

    pub(super) fn reopen_index(&self) -> Result<(), CacheError> {
        let fresh = Arc::new(self.folder.open("index", true, false)?);
        *self.index.write().map_err(|_| CacheError("a thread panicked holding the index".into()))? = fresh;
        Ok(())
    }

    /// Under the writers' lock: make the store anew if `seen` (an index whose state failed its
    /// checks) is still the current one and still fails them.
    fn repair(&self, seen: &Arc<File>) -> Result<(), CacheError> {
        let _writer = lock(&self.writer);
        let _locked = Locked::exclusive(&self.lock)?;
        let current = self.index.read().map_err(|_| CacheError("a thread panicked holding the index".into()))?.clone();
        if !Arc::ptr_eq(&current, seen) {
            return Ok(());
        }
        let named = self.folder.open("index", true, false);
        if let Ok(named) = named {
            if read_state(&named, true)?.is_some_and(|state| !state.superseded) {
                *self.index.write().map_err(|_| CacheError("a thread panicked holding the index".into()))? = Arc::new(named);
                return Ok(()); // another process repaired it first
            }
        }
        let index = Self::make_anew(&self.folder, &self.settings)?;
        *self.index.write().map_err(|_| CacheError("a thread panicked holding the index".into()))? = Arc::new(index);
        self.notice("its index failed its checks (damaged) while in use: emptied and made again".into());
        Ok(())
    }

    /// The open segment `number` of `state`'s store, and its size (looked at again when an
    /// entry ends past it); None when it is not held.
    fn segment_file(&self, state: &State, number: u64, end: u64) -> Result<Option<Arc<File>>, CacheError> {
        let held = match state.segment(number) {
            Some(segment) if end <= segment.bytes => segment,
            _ => return Ok(None),
        };
        let mut open = lock(&self.open);
        if open.store != state.store {
            *open = Open { store: state.store, files: HashMap::new() };
        }
        let first = state.segments[0].number;
        open.files.retain(|&number, _| number >= first); // removed segments: let their space go
        if let Some((file, size)) = open.files.get_mut(&number) {
            if end > *size {
                *size = size_of(file)?;
            }
            return Ok((end <= *size).then(|| file.clone()));
        }
        let Ok(file) = self.folder.open(&segment_name(held.number), false, false) else {
            return Ok(None); // removed just now, or not a regular file (a miss; the writer replaces it)
        };
        let file = Arc::new(file);
        let size = size_of(&file)?;
        open.files.insert(number, (file.clone(), size));
        Ok((end <= size).then_some(file))
    }

    /// Where each of `names`' records is (None where missing), found in one read of the state.
    pub fn locate_many<K: AsRef<[u8]>>(&self, names: &[K]) -> Result<Vec<Option<Located>>, CacheError> {
        let (index, state) = self.current()?;
        let mut found = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            if name.len() > LONGEST_NAME {
                found.push(None);
                continue;
            }
            let hash = name_hash(name);
            let mut slot = None;
            cache_index::probe(&index, state.capacity, hash, |_, candidate| {
                if candidate.hash == hash && state.holds(candidate) {
                    slot = Some(*candidate);
                    return Probe::Stop;
                }
                Probe::Next
            })?;
            let located = match slot {
                Some(slot) if slot.length >= (RECORD_HEADER + name.len()) as u64 => match slot.offset.checked_add(slot.length) {
                    Some(end) => self.segment_file(&state, slot.segment, end)?.map(|segment| Located {
                        segment,
                        offset: slot.offset,
                        length: (slot.length - (RECORD_HEADER + name.len()) as u64) as usize,
                    }),
                    None => None,
                },
                _ => None,
            };
            found.push(located);
        }
        Ok(found)
    }

    /// Read the entry of `name` at `located` into `value` (`located.length` bytes) and check it:
    /// whether it is `name`'s, whole (false: a miss; a damaged one is counted for `notices`).
    pub fn read_located(&self, name: &[u8], located: &Located, value: &mut [u8]) -> bool {
        let mut head = vec![0u8; RECORD_HEADER + name.len()];
        let wanted = head.len() + value.len();
        let read = read_at(&located.segment, &mut [&mut head, value], located.offset);
        if read.ok() != Some(wanted) {
            return false;
        }
        match check_record(name, &head, value) {
            Record::Whole => true,
            Record::Other => false,
            Record::Damaged => {
                self.damaged.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Hand `found` each of `names`' bytes (None where missing).
    pub fn get_many<K: AsRef<[u8]>>(&self, names: &[K], mut found: impl FnMut(Option<&[u8]>)) -> Result<(), CacheError> {
        for (name, located) in names.iter().zip(self.locate_many(names)?) {
            let value = located.and_then(|located| {
                let mut value = vec![0u8; located.length];
                self.read_located(name.as_ref(), &located, &mut value).then_some(value)
            });
            found(value.as_deref());
        }
        Ok(())
    }

    /// Bytes charged to the entries held now, for all processes.
    pub fn size(&self) -> Result<u64, CacheError> {
        Ok(self.current()?.1.charged())
    }

    /// Entries held now, for all processes.
    pub fn len(&self) -> Result<u64, CacheError> {
        Ok(self.current()?.1.live())
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> Result<bool, CacheError> {
        Ok(self.len()? == 0)
    }
}

#[cfg(test)]
#[path = "cache_entries_tests.rs"]
mod tests;
